"""A run's aggregate refuses incomplete predictions unless the run spec allows them, then shows coverage."""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from pathlib import Path

import pytest
import yaml
from test_score_command import CHOICES, args, paths_of, prediction, sample, specs_dir  # noqa: F401

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.score.compare import compare_command
from milebench.benchmarks.milebench.score.run_aggregate import IncompleteError, aggregate, aggregate_run
from milebench.benchmarks.milebench.scoring import score
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.io import atomic_write_jsonl
from milebench.spec.base import SpecError

TASKS = ("ActionSequence", "Spot-the-Diff", "TextNeedleInAHaystack")


def fill(specs_dir: Path, drop: tuple[str, int] | None = None) -> None:  # noqa: F811
    """Prepare, predict and score every cell of run ``t``; ``drop`` leaves one prediction out."""
    paths = paths_of(specs_dir)
    for mode in (Mode.MULTI_IMAGE, Mode.ADVERSARIAL):
        for task in TASKS:
            if mode is Mode.ADVERSARIAL and task == "TextNeedleInAHaystack":
                continue
            choices = CHOICES if task == "ActionSequence" else None
            gold = "banana" if choices else "the car is gone"
            rows = [
                sample(task, i, gold, choices, 2 + 20 * i, "Few") | {"mode": mode.value} for i in range(3)
            ]
            atomic_write_jsonl(paths.prepared(task, mode), rows)
            answers = ["B", "the car is gone", "A"] if mode is Mode.MULTI_IMAGE else ["A", "x", "A"]
            preds = [
                prediction(task, i, answers[i]) | {"mode": mode.value}
                for i in range(3)
                if (task, i) != drop or mode is not Mode.MULTI_IMAGE
            ]
            atomic_write_jsonl(paths.predictions("random", task, mode), preds)
            assert score(args(specs_dir, task, mode)) == 0


def allow(specs_dir: Path) -> None:  # noqa: F811
    path = specs_dir / "runs" / "t.yaml"
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, "allow_incomplete": True}))


def test_complete_run_aggregates_every_column(specs_dir: Path) -> None:  # noqa: F811
    fill(specs_dir)
    specs = load_specs(specs_dir)
    result = aggregate_run(specs, specs.run("t"), paths_of(specs_dir), resamples=100)
    assert result.complete and not result.incomplete
    multi = next(m for m in result.models if m.mode is Mode.MULTI_IMAGE)
    assert multi.columns["ActionSequence"].value == pytest.approx(100 / 3)
    assert multi.columns["T-1"].value == pytest.approx(100 / 3)
    assert multi.column_coverage["ActionSequence"] == 1.0
    assert multi.coverage.complete
    # Spot-the-Diff: standard ROUGE-L scores "B" and "A" 0 and the exact answer 1, like the paper scorer.
    assert multi.variants["standard"].difference["Spot-the-Diff"] == pytest.approx(0.0, abs=1e-6)
    # "A" is wrong under both scorers; "B" right; the needle sample 1 holds no needle.
    assert multi.levels["Few"].n_scored == 3
    delta = result.adversarial[0]
    assert delta.model == "random"
    assert delta.delta is None  # the run's tasks do not fill the nine realistic groups


def test_missing_prediction_is_refused_naming_task_sample_and_field(specs_dir: Path) -> None:  # noqa: F811
    fill(specs_dir, drop=("ActionSequence", 1))
    specs = load_specs(specs_dir)
    with pytest.raises(IncompleteError) as err:
        aggregate_run(specs, specs.run("t"), paths_of(specs_dir), resamples=10)
    message = str(err.value)
    assert "allow_incomplete" in message
    assert "random/multi-image/ActionSequence: missing samples [1]" in message
    assert err.value.cells[0].missing_ids == (1,)


def test_aggregate_command_exits_1_then_builds_with_coverage_when_allowed(
    specs_dir: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    fill(specs_dir, drop=("ActionSequence", 1))
    namespace = argparse.Namespace(run="t", specs=specs_dir, root=Path("."), resamples=50, seed=0)
    with caplog.at_level(logging.ERROR):
        assert aggregate(namespace) == 1
    assert "ActionSequence: missing samples [1]" in caplog.text
    paths = paths_of(specs_dir)
    assert not paths.aggregate_json.exists()

    allow(specs_dir)
    assert aggregate(namespace) == 0
    data = json.loads(paths.aggregate_json.read_text())
    assert data["complete"] is False and data["allow_incomplete"] is True
    multi = next(m for m in data["models"] if m["mode"] == "multi-image")
    assert multi["column_coverage"]["ActionSequence"] == pytest.approx(2 / 3)
    assert multi["coverage"]["samples_missing"] == 1
    # 1 right of 3 expected (the missing sample counts as wrong); scored-only: 1 of the 2 answered.
    assert (data["denominator"], multi["denominator"]) == ("expected", "expected")
    assert multi["columns"]["ActionSequence"]["value"] == pytest.approx(100 / 3)
    assert multi["scored_only"]["ActionSequence"] == pytest.approx(50.0)
    verdict = json.loads(paths.verdict_json.read_text())
    assert verdict["run"] == "t" and verdict["cells"] == []  # the test paper spec has no rows


def test_compare_two_runs_of_one_model(specs_dir: Path, capsys: pytest.CaptureFixture) -> None:  # noqa: F811
    fill(specs_dir)
    run_t = yaml.safe_load((specs_dir / "runs" / "t.yaml").read_text())
    out2 = Path(run_t["output_dir"] + "2")
    shutil.copytree(run_t["output_dir"], out2)
    (specs_dir / "runs" / "t2.yaml").write_text(
        yaml.safe_dump({**run_t, "name": "t2", "output_dir": str(out2)})
    )
    specs = load_specs(specs_dir)
    paths2 = RunPaths.for_run(specs.run("t2"))
    atomic_write_jsonl(
        paths2.predictions("random", "ActionSequence", Mode.MULTI_IMAGE),
        [prediction("ActionSequence", i, "B") for i in range(3)],
    )
    rescore = args(specs_dir, "ActionSequence")
    rescore.run = "t2"
    assert score(rescore) == 0

    ns = argparse.Namespace(
        run="t", run_b="t2", model_a="random", model_b=None, mode=Mode.MULTI_IMAGE, scorer="paper",
        resamples=200, seed=0, out=out2 / "compare.json", specs=specs_dir,
    )  # fmt: skip
    assert compare_command(ns) == 0
    rows = {r["column"]: r for r in json.loads((out2 / "compare.json").read_text())["rows"]}
    assert rows["ActionSequence"]["difference"] == pytest.approx(100 / 3 - 100)
    assert rows["ActionSequence"]["n_pairs"] == 3
    assert rows["Spot-the-Diff"]["difference"] == 0.0 and rows["Spot-the-Diff"]["p_value"] == 1.0
    assert "t/random minus t2/random" in capsys.readouterr().out

    with pytest.raises(SpecError, match="two different models or runs"):
        compare_command(argparse.Namespace(**{**vars(ns), "run_b": None}))


def test_a_task_score_from_before_the_official_denominator_is_refused_by_name(
    specs_dir: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A score file without the denominator would be read as the paper's number: the aggregate names the
    file and the missing fields, and exits 1."""
    fill(specs_dir)
    path = paths_of(specs_dir).task_score("random", "ActionSequence", Mode.MULTI_IMAGE)
    stale = json.loads(path.read_text())
    del stale["denominator"], stale["scored_only"]
    path.write_text(json.dumps(stale))
    with caplog.at_level(logging.ERROR):
        assert (
            aggregate(argparse.Namespace(run="t", specs=specs_dir, root=Path("."), resamples=10, seed=0)) == 1
        )
    assert caplog.messages[-1] == (
        f"{path}: not a valid task score (denominator: Field required; scored_only: Field required); a file "
        "written before scores divided by every expected sample lacks denominator and scored_only: run "
        "`milebench score` again"
    )
