"""The per-sample log the score stage writes (prepared samples, predictions and judgments joined by
sample_id) and `milebench show`, which prints and filters it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_score_command import CHOICES, paths_of, prediction, sample, specs_dir  # noqa: F401

from milebench import cli
from milebench.benchmarks.milebench.plan import cells
from milebench.benchmarks.milebench.provenance import read_provenance
from milebench.benchmarks.milebench.score.sample_log import SampleLog
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.infer.records import FailureKind
from milebench.io import atomic_write_jsonl, read_jsonl

TASK = "ActionSequence"
MULTI = Mode.MULTI_IMAGE


@pytest.fixture
def scored(specs_dir: Path) -> Path:  # noqa: F811
    """ActionSequence scored: 0 right, 1 wrong, 2 right, 3 failed (oom), 4 missing."""
    paths = paths_of(specs_dir)
    golds = ["banana", "cherry", "date", "apple", "apple"]
    prepared = [sample(TASK, i, gold, CHOICES, 3, "Few") for i, gold in enumerate(golds)]
    atomic_write_jsonl(paths.prepared(TASK, MULTI), prepared)
    preds = [prediction(TASK, 0, "B. banana"), prediction(TASK, 1, "The answer is B."),
             prediction(TASK, 2, "D"), prediction(TASK, 3, None, FailureKind.OOM)]  # fmt: skip
    atomic_write_jsonl(paths.predictions("random", TASK, MULTI), preds)
    argv = ["--specs", str(specs_dir), "score", "--run", "t", "--model", "random", "--task", TASK]
    assert cli.main([*argv, "--mode", "multi-image"]) == 0
    return specs_dir


def test_the_log_holds_the_cells_samples_with_the_three_files_values(scored: Path) -> None:
    paths = paths_of(scored)
    rows = [SampleLog.model_validate(r) for r in read_jsonl(paths.samples("random", TASK, MULTI))]
    prepared = list(read_jsonl(paths.prepared(TASK, MULTI)))
    preds = {p["sample_id"]: p for p in read_jsonl(paths.predictions("random", TASK, MULTI))}
    judged = {(j["scorer"], j["sample_id"]): j for j in read_jsonl(paths.judgments("random", TASK, MULTI))}

    assert [r.sample_id for r in rows] == [s["sample_id"] for s in prepared] == [0, 1, 2, 3, 4]
    for row, source in zip(rows, prepared, strict=True):
        pred, paper = preds.get(row.sample_id), judged[("paper", row.sample_id)]
        standard = judged[("standard", row.sample_id)]
        assert (row.task, row.mode, row.model) == (TASK, MULTI, "random")
        assert row.prompt == f"{source['instruction']}\n{source['context']}"
        assert list(row.images or ()) == source["images"] and list(row.choices or ()) == source["choices"]
        assert row.gold == source["response"]
        assert row.answer == (None if pred is None else pred["response"])
        assert (row.status, row.extracted, row.score) == (paper["status"], paper["extracted"], paper["score"])
        assert row.failure == (None if pred is None else pred["failure"]) == paper["failure"]
        assert row.variants["standard"].model_dump() == {
            "extracted": standard["extracted"],
            "score": standard["score"],
        }
        assert row.image_quantity_level == paper["image_quantity_level"]
    assert [(r.status, r.extracted, r.score, r.answer) for r in rows] == [
        ("scored", "B", 1.0, "B. banana"),
        ("scored", "AB", 0.0, "The answer is B."),
        ("scored", "D", 1.0, "D"),
        ("failed", None, None, None),
        ("missing", None, None, None),
    ]
    assert rows[3].failure is FailureKind.OOM
    provenance = read_provenance(paths.score_provenance("random", TASK, MULTI))
    assert str(paths.samples("random", TASK, MULTI)) in provenance.outputs


def show(specs: Path, *options: str) -> int:
    return cli.main(["--specs", str(specs), "show", "--run", "t", *options])


def shown_ids(capsys: pytest.CaptureFixture[str], specs: Path, *options: str) -> list[int]:
    assert show(specs, *options) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split("\t")[:4] == ["model", "mode", "task", "sample"]
    return [int(line.split("\t")[3]) for line in lines]


FILTERS: dict[tuple[str, ...], list[int]] = {
    (): [0, 1, 2, 3, 4],
    ("--model", "random", "--task", TASK, "--mode", "multi-image"): [0, 1, 2, 3, 4],
    ("--mode", "adversarial"): [],  # in the run, not scored yet
    ("--correct",): [0, 2],
    ("--incorrect",): [1],
    ("--failure",): [3],
    ("--failure", "oom"): [3],
    ("--failure", "timeout"): [],
    ("--status", "missing"): [4],
    ("--status", "scored", "--incorrect"): [1],
    ("--sample", "4", "--sample", "1"): [1, 4],
    ("--sample", "1", "--correct"): [],
}


@pytest.mark.parametrize("options", FILTERS, ids=lambda o: " ".join(o) or "none")
def test_show_keeps_the_samples_each_filter_names(
    scored: Path, capsys: pytest.CaptureFixture[str], options: tuple[str, ...]
) -> None:
    if options == ("--mode", "adversarial"):
        assert show(scored, *options) == 1  # nothing scored in that mode yet: said, not an empty table
        return
    assert shown_ids(capsys, scored, *options) == FILTERS[options]


def test_show_json_prints_the_records_whole(scored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert show(scored, "--json", "--incorrect") == 0
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    in_file = list(read_jsonl(paths_of(scored).samples("random", TASK, MULTI)))
    assert record == in_file[1] and record["prompt"] == "Answer.\nctx"


BAD: dict[tuple[str, ...], str] = {
    ("--model", "randon"): "argument --model: model 'randon' is not part of run 't' (did you mean random?)",
    ("--task", "Spot-the-Dif"): "argument --task: task 'Spot-the-Dif' is not part of run 't' (did you mean",
    ("--mode", "combined-image"): "argument --mode: mode 'combined-image' is not part of run 't'",
    ("--sample", "99"): "argument --sample: sample 99 is in none of the chosen cells",
}


@pytest.mark.parametrize("options", BAD, ids=lambda o: " ".join(o))
def test_a_filter_naming_nothing_of_the_run_is_an_argument_error(
    scored: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    options: tuple[str, ...],
) -> None:
    assert show(scored, *options) == 2
    assert BAD[options] in caplog.text
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (("--failure", "boom"), "argument --failure: invalid choice: 'boom'"),
        (("--correct", "--incorrect"), "argument --incorrect: not allowed with argument --correct"),
        (("--sample", "x"), "argument --sample: invalid int value: 'x'"),
        (("--status", "done"), "argument --status: invalid choice: 'done'"),
    ],
)
def test_a_malformed_filter_is_refused_by_the_parser(
    scored: Path, capsys: pytest.CaptureFixture[str], options: tuple[str, ...], says: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        show(scored, *options)
    assert exited.value.code == 2 and says in capsys.readouterr().err


def test_show_before_scoring_names_the_stage_to_run(
    specs_dir: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert show(specs_dir) == 1
    specs = load_specs(specs_dir)
    n = len(cells(specs, specs.run("t")))
    assert f"the per-sample log of any of the {n} chosen cells of run t not found" in caplog.text
    assert "milebench score --run t" in caplog.text
