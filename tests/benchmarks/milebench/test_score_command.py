"""``milebench score`` end to end on fixtures in the upstream record formats, in a temporary run folder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from milebench.benchmarks.milebench.data.schema import quantity_level
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.provenance import read_provenance
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.score.aggregate import TaskScore
from milebench.benchmarks.milebench.scoring import score
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import (
    GROUP_CATEGORY,
    Group,
    Metric,
    QuestionType,
    ScorerKind,
    TaskSpec,
)
from milebench.infer.records import FailureKind, Prediction
from milebench.io import atomic_write_jsonl
from milebench.record_files import RecordError
from milebench.spec.base import Spec, SpecError
from milebench.spec.model import BuiltinModel, ModelSpec, Section

TASKS = {
    "ActionSequence": (Group.T1, QuestionType.MULTI_CHOICE, ScorerKind.CHOICE, Metric.ACCURACY),
    "Spot-the-Diff": (Group.S3, QuestionType.OPEN_ENDED, ScorerKind.ROUGE_L, Metric.ROUGE_L),
    "TextNeedleInAHaystack": (Group.N1, QuestionType.OPEN_ENDED, ScorerKind.NEEDLE, Metric.ACCURACY),
}


def dump(path: Path, spec: Spec | dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = spec.model_dump(mode="json") if isinstance(spec, Spec) else spec
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


@pytest.fixture
def specs_dir(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    for name, (group, qtype, scorer, metric) in TASKS.items():
        spec = TaskSpec(
            name=name, display_name=name, group=group, group_name="g", category=GROUP_CATEGORY[group],
            question_type=qtype, metric=metric, scorer=scorer, n_samples=4,
            has_adversarial=group is not Group.N1, source_dataset=name,
        )  # fmt: skip
        dump(root / "tasks" / f"{name}.yaml", spec)
    model = ModelSpec(
        name="random", display_name="Random", section=Section.BASELINE, adapter="random",
        weights=BuiltinModel(kind="builtin"),
    )  # fmt: skip
    dump(root / "models" / "random.yaml", model)
    run = RunSpec(
        name="t", description="test run", models=("random",), modes=(Mode.MULTI_IMAGE, Mode.ADVERSARIAL),
        data=FixtureSource(kind="fixture"), output_dir=str(tmp_path / "out"),
    )  # fmt: skip
    dump(root / "runs" / "t.yaml", run)
    paper = {
        "source": "test",
        "main_table": {"caption": "c", "rows": []},
        "contamination": {"caption": "c", "rows": []},
        "image_quantity": {"note": "n", "rows": []},
    }
    dump(root / "paper.yaml", paper)
    return root


def paths_of(specs_dir: Path) -> RunPaths:
    run = RunSpec.model_validate(yaml.safe_load((specs_dir / "runs" / "t.yaml").read_text()))
    return RunPaths.for_run(run)


def sample(
    task: str, sample_id: int, gold: str, choices: list[str] | None, n_images: int, level: str
) -> dict:
    qtype = QuestionType.MULTI_CHOICE if choices else QuestionType.OPEN_ENDED
    return PreparedSample(
        task=task, mode=Mode.MULTI_IMAGE, sample_id=sample_id, instruction="Answer.", context="ctx",
        images=tuple(f"{task}/images/{i}.jpg" for i in range(n_images)),
        image_sha256=tuple("a" * 64 for _ in range(n_images)), prompt_sha256="b" * 64,
        question_type=qtype, choices=tuple(choices) if choices else None, response=gold,
        image_quantity_level=level, n_images=n_images,
    ).model_dump(mode="json")  # fmt: skip


def prediction(task: str, sample_id: int, response: str | None, failure: FailureKind | None = None) -> dict:
    return Prediction(
        task=task, mode=Mode.MULTI_IMAGE, model="random", sample_id=sample_id, response=response,
        failure=failure, cache_key="k", seconds=0.1,
    ).model_dump(mode="json")  # fmt: skip


def args(specs_dir: Path, task: str, mode: Mode = Mode.MULTI_IMAGE) -> argparse.Namespace:
    return argparse.Namespace(
        run="t", model="random", task=task, mode=mode, specs=specs_dir, outputs=None, root=Path(".")
    )


CHOICES = ["apple", "banana", "cherry", "date"]


def test_scores_judges_and_counts_failed_and_missing(specs_dir: Path) -> None:
    paths = paths_of(specs_dir)
    prepared = [
        sample("ActionSequence", 0, "banana", CHOICES, 3, "Few"),
        sample("ActionSequence", 1, "cherry", CHOICES, 3, "Few"),
        # The data says Medium, but the evaluator derives the level from the count (40 images: Many).
        sample("ActionSequence", 2, "date", CHOICES, 40, "Medium"),
        sample("ActionSequence", 3, "apple", CHOICES, 10, "Medium"),
        sample("ActionSequence", 4, "apple", CHOICES, 10, "Medium"),
    ]
    atomic_write_jsonl(paths.prepared("ActionSequence", Mode.MULTI_IMAGE), prepared)
    preds = [
        prediction("ActionSequence", 0, "B. banana"),
        prediction("ActionSequence", 1, "The answer is B."),
        prediction("ActionSequence", 2, "D"),
        prediction("ActionSequence", 3, None, FailureKind.OOM),
    ]
    atomic_write_jsonl(paths.predictions("random", "ActionSequence", Mode.MULTI_IMAGE), preds)

    assert score(args(specs_dir, "ActionSequence")) == 0

    everything = [
        json.loads(line) for line in paths.judgments("random", "ActionSequence", Mode.MULTI_IMAGE).open()
    ]
    assert [r["scorer"] for r in everything] == ["paper"] * 5 + ["standard"] * 5
    rows = everything[:5]
    by_id = {r["sample_id"]: r for r in rows}
    assert [(r["status"], r["extracted"], r["score"]) for r in rows] == [
        ("scored", "B", 1.0),
        ("scored", "AB", 0.0),
        ("scored", "D", 1.0),
        ("failed", None, None),
        ("missing", None, None),
    ]
    assert by_id[3]["failure"] == "oom"
    assert by_id[2]["image_quantity_level"] == "Many" == quantity_level(40)
    assert all(r["model"] == "random" for r in rows)
    # The standard scorer reads "The answer is B." as B, which is wrong here (the gold is C).
    standard = [(r["status"], r["extracted"], r["score"]) for r in everything[5:]]
    assert standard[:3] == [("scored", "B", 1.0), ("scored", "B", 0.0), ("scored", "D", 1.0)]

    provenance = read_provenance(paths.score_provenance("random", "ActionSequence", Mode.MULTI_IMAGE))
    assert provenance.prompt_rebuilt is True  # judged against the kit's prepared samples

    result = json.loads(paths.task_score("random", "ActionSequence", Mode.MULTI_IMAGE).read_text())
    # Two right of five expected: the failed and the missing sample count as wrong, as the official
    # evaluator divides by every sample; the scored-only variant divides by the three answers.
    assert (result["denominator"], result["score"]) == ("expected", pytest.approx(40.0))
    assert result["scored_only"] == pytest.approx(200 / 3)
    assert (result["n"], result["n_scored"], result["n_missing"], result["n_failed"]) == (5, 3, 1, 1)
    assert (result["task"], result["model"], result["mode"], result["scorer"]) == (
        "ActionSequence",
        "random",
        "multi-image",
        "paper",
    )
    assert result["levels"]["Few"] == {"score": 50.0, "n": 2, "n_scored": 2}
    assert result["levels"]["Many"] == {"score": 100.0, "n": 1, "n_scored": 1}
    assert result["levels"]["Medium"] == {"score": 0.0, "n": 2, "n_scored": 0}
    assert result["failures"] == {"oom": 1}
    assert (result["missing_ids"], result["failed_ids"]) == ([4], [3])
    assert result["variants"]["standard"]["score"] == pytest.approx(40.0)
    assert result["variants"]["standard"]["n_scored"] == 3


def test_missing_predictions_file_marks_every_sample_missing(specs_dir: Path) -> None:
    paths = paths_of(specs_dir)
    prepared = [sample("Spot-the-Diff", i, "the car is gone", None, 2, "Few") for i in range(3)]
    atomic_write_jsonl(paths.prepared("Spot-the-Diff", Mode.MULTI_IMAGE), prepared)

    assert score(args(specs_dir, "Spot-the-Diff")) == 0

    result = json.loads(paths.task_score("random", "Spot-the-Diff", Mode.MULTI_IMAGE).read_text())
    assert (result["score"], result["scored_only"]) == (0.0, None)
    assert (result["n"], result["n_missing"], result["n_scored"]) == (3, 3, 0)


def test_open_ended_scores_are_rouge_l(specs_dir: Path) -> None:
    paths = paths_of(specs_dir)
    atomic_write_jsonl(
        paths.prepared("Spot-the-Diff", Mode.MULTI_IMAGE),
        [sample("Spot-the-Diff", 0, "the car is gone", None, 2, "Few")],
    )
    atomic_write_jsonl(
        paths.predictions("random", "Spot-the-Diff", Mode.MULTI_IMAGE),
        [prediction("Spot-the-Diff", 0, "The car is gone.")],
    )
    assert score(args(specs_dir, "Spot-the-Diff")) == 0
    result = json.loads(paths.task_score("random", "Spot-the-Diff", Mode.MULTI_IMAGE).read_text())
    assert result["score"] == pytest.approx(99.9999995)


def test_prediction_of_another_task_is_rejected_with_file_and_record(specs_dir: Path) -> None:
    paths = paths_of(specs_dir)
    atomic_write_jsonl(
        paths.prepared("ActionSequence", Mode.MULTI_IMAGE),
        [sample("ActionSequence", 0, "apple", CHOICES, 2, "Few")],
    )
    pred_file = paths.predictions("random", "ActionSequence", Mode.MULTI_IMAGE)
    atomic_write_jsonl(pred_file, [prediction("Spot-the-Diff", 0, "A")])
    with pytest.raises(RecordError, match=rf"{pred_file}: record 1: task 'Spot-the-Diff'"):
        score(args(specs_dir, "ActionSequence"))


def test_malformed_prediction_names_file_record_and_field(specs_dir: Path) -> None:
    paths = paths_of(specs_dir)
    atomic_write_jsonl(
        paths.prepared("ActionSequence", Mode.MULTI_IMAGE),
        [sample("ActionSequence", 0, "apple", CHOICES, 2, "Few")],
    )
    row = prediction("ActionSequence", 0, "A")
    row["seconds"] = -1
    atomic_write_jsonl(paths.predictions("random", "ActionSequence", Mode.MULTI_IMAGE), [row])
    with pytest.raises(RecordError, match=r"record 1: seconds"):
        score(args(specs_dir, "ActionSequence"))


def test_adversarial_mode_of_a_task_without_an_adversarial_set_is_refused(specs_dir: Path) -> None:
    with pytest.raises(SpecError, match="no adversarial set"):
        score(args(specs_dir, "TextNeedleInAHaystack", Mode.ADVERSARIAL))


def test_unknown_model_is_refused(specs_dir: Path) -> None:
    bad = args(specs_dir, "ActionSequence")
    bad.model = "nobody"
    with pytest.raises(SpecError, match="'nobody' is not part of run 't'"):
        score(bad)


def test_task_score_holds_both_scorers_and_their_difference(specs_dir: Path) -> None:
    paths = paths_of(specs_dir)
    prepared = [sample("ActionSequence", i, "banana", CHOICES, 3, "Few") for i in range(4)]
    atomic_write_jsonl(paths.prepared("ActionSequence", Mode.MULTI_IMAGE), prepared)
    answers = ["The answer is B.", "Answer: (B)", "**B**", ""]
    preds = [prediction("ActionSequence", i, a) for i, a in enumerate(answers)]
    atomic_write_jsonl(paths.predictions("random", "ActionSequence", Mode.MULTI_IMAGE), preds)
    assert score(args(specs_dir, "ActionSequence")) == 0
    result = TaskScore.model_validate_json(
        paths.task_score("random", "ActionSequence", Mode.MULTI_IMAGE).read_text()
    )
    # paper: "AB", "AB", "B", and "C" for the empty answer; standard: B, B, B, nothing.
    assert result.score == pytest.approx(25.0)
    assert result.variants["standard"].score == pytest.approx(75.0)
    assert result.difference("standard") == pytest.approx(50.0)
    assert result.difference("nope") is None
