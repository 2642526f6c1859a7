"""Run-level scoring commands, stated as rules: the verdict of a run, the settings the aggregate records,
the compare table, and predictions imported from the official code."""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from pathlib import Path

import pytest
import yaml
from test_import_official import ns, official_record, setup  # noqa: F401
from test_paper_scorer import make_task
from test_score_aggregate_run import allow, fill
from test_score_command import CHOICES, args, paths_of, prediction, sample, specs_dir  # noqa: F401

from milebench.benchmarks.milebench.paths import UNLIMITED_REGIME, RunPaths
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.provenance import DataRevision, read_provenance
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.score.commands import _points, judge_sample
from milebench.benchmarks.milebench.score.compare import compare_command, format_table
from milebench.benchmarks.milebench.score.official import OfficialFormatError
from milebench.benchmarks.milebench.score.run_aggregate import (
    IncompleteCell,
    IncompleteError,
    ModelAggregate,
    adversarial_deltas,
    aggregate,
    aggregate_run,
    incomplete_cells,
    require_complete,
    run_verdict,
)
from milebench.benchmarks.milebench.score.run_files import RunFiles
from milebench.benchmarks.milebench.score.uncertainty import Comparison, Estimate, compare
from milebench.benchmarks.milebench.scoring import import_official, score
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import Category, Group
from milebench.infer.records import FailureKind, Prediction
from milebench.io import atomic_write_jsonl, read_jsonl
from milebench.spec.base import SpecError
from milebench.stage_inputs import MissingInput

PUBLISHED = {g.value: 10.0 for g in Group} | {"T-1": 33.3, "N-1": 50.0}


def publish_random(specs_dir: Path) -> None:  # noqa: F811
    """Give the test paper spec a row for the run's model."""
    path = specs_dir / "paper.yaml"
    paper = yaml.safe_load(path.read_text())
    paper["main_table"]["rows"] = [
        {"paper_name": "Random", "model": "random", "section": "baseline", "size": None,
         "groups": PUBLISHED, "overall_real": 10.0, "overall_diag": 10.0}
    ]  # fmt: skip
    path.write_text(yaml.safe_dump(paper))


def set_modes(specs_dir: Path, modes: list[str]) -> None:  # noqa: F811
    path = specs_dir / "runs" / "t.yaml"
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), "modes": modes}))


# --- the verdict of a run ----------------------------------------------------------------------------


def test_run_verdict_judges_the_multi_image_scores(specs_dir: Path) -> None:  # noqa: F811
    publish_random(specs_dir)
    fill(specs_dir)
    specs = load_specs(specs_dir)
    verdict = run_verdict(specs, specs.run("t"), paths_of(specs_dir), resamples=50, seed=4, confidence=0.9)
    cells = {c.column: c for c in verdict.cells}
    assert len(cells) == 14 and {c.model for c in verdict.cells} == {"random"}
    # ActionSequence (T-1): one of three right in multi-image (adversarial answers are all wrong).
    assert cells["T-1"].ours == pytest.approx(100 / 3)
    assert cells["T-1"].passed is True  # 33.33 against the printed 33.3
    # The needle task (N-1): a gold of four words is never one word of an answer, 0 against 50.0 printed.
    assert cells["N-1"].ours == 0.0 and cells["N-1"].passed is False
    assert cells["T-2"].ours is None and cells["T-2"].coverage is None  # no task of T-2 in the specs
    assert (verdict.scorer, verdict.resamples, verdict.seed, verdict.confidence) == ("paper", 50, 4, 0.9)


def test_run_verdict_is_refused_for_an_incomplete_run(specs_dir: Path) -> None:  # noqa: F811
    publish_random(specs_dir)
    fill(specs_dir, drop=("ActionSequence", 1))
    specs = load_specs(specs_dir)
    with pytest.raises(IncompleteError, match="random/multi-image/ActionSequence: missing samples"):
        run_verdict(specs, specs.run("t"), paths_of(specs_dir))


def test_run_verdict_defaults(specs_dir: Path) -> None:  # noqa: F811
    publish_random(specs_dir)
    fill(specs_dir)
    specs = load_specs(specs_dir)
    verdict = run_verdict(specs, specs.run("t"), paths_of(specs_dir))
    assert (verdict.scorer, verdict.resamples, verdict.seed, verdict.confidence) == ("paper", 2000, 0, 0.95)


def test_aggregate_records_the_asked_resamples_and_seed(specs_dir: Path) -> None:  # noqa: F811
    publish_random(specs_dir)
    fill(specs_dir)
    assert aggregate(argparse.Namespace(run="t", specs=specs_dir, resamples=30, seed=5, root=Path("."))) == 0
    paths = paths_of(specs_dir)
    result = json.loads(paths.aggregate_json.read_text())
    verdict = json.loads(paths.verdict_json.read_text())
    assert (result["resamples"], result["seed"]) == (30, 5)
    assert (verdict["resamples"], verdict["seed"]) == (30, 5)
    assert [c["column"] for c in verdict["cells"]][:2] == ["T-1", "T-2"]


def test_aggregate_reads_and_writes_under_the_root_it_is_given(
    specs_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run with a relative output folder is found under --root, wherever the command runs."""
    run_path = specs_dir / "runs" / "t.yaml"
    run_path.write_text(yaml.safe_dump({**yaml.safe_load(run_path.read_text()), "output_dir": "results/t"}))
    publish_random(specs_dir)
    staged = tmp_path / "staged"
    staged.mkdir()
    monkeypatch.chdir(staged)
    fill(specs_dir)
    monkeypatch.chdir(tmp_path)
    ns_ = argparse.Namespace(run="t", specs=specs_dir, resamples=10, seed=0, root=staged)
    assert aggregate(ns_) == 0
    assert (staged / "results" / "t" / "aggregate.json").is_file()
    assert (staged / "results" / "t" / "verdict.json").is_file()


def test_a_run_never_scored_names_the_score_command(specs_dir: Path) -> None:  # noqa: F811
    with pytest.raises(MissingInput) as err:
        aggregate(argparse.Namespace(run="t", specs=specs_dir, resamples=10, seed=0, root=Path(".")))
    assert str(err.value) == (
        f"{paths_of(specs_dir).out / 'scores'}: task scores of run 't' not found; run `milebench score "
        "--run t --model <model> --task <Task> --mode <mode>` first"
    )


def test_scoring_a_task_never_prepared_names_the_preprocess_command(specs_dir: Path) -> None:  # noqa: F811
    prepared = paths_of(specs_dir).prepared("ActionSequence", Mode.ADVERSARIAL, UNLIMITED_REGIME)
    with pytest.raises(MissingInput) as err:
        score(args(specs_dir, "ActionSequence", Mode.ADVERSARIAL))
    assert str(err.value) == (
        f"{prepared}: prepared samples not found; run `milebench preprocess --run t --task ActionSequence "
        f"--mode adversarial --regime {UNLIMITED_REGIME}` first"
    )


def test_an_aggregate_names_the_model_and_mode_it_lacks(specs_dir: Path) -> None:  # noqa: F811
    fill(specs_dir)
    specs = load_specs(specs_dir)
    result = aggregate_run(specs, specs.run("t"), paths_of(specs_dir), resamples=10)
    assert result.model("random", Mode.ADVERSARIAL).mode is Mode.ADVERSARIAL
    with pytest.raises(KeyError) as err:
        result.model("random", Mode.COMBINED_IMAGE)
    assert err.value.args == ("random/combined-image",)


def test_a_run_without_multi_image_has_no_verdict(specs_dir: Path) -> None:  # noqa: F811
    publish_random(specs_dir)
    fill(specs_dir)
    set_modes(specs_dir, ["adversarial"])
    assert aggregate(argparse.Namespace(run="t", specs=specs_dir, resamples=10, seed=0, root=Path("."))) == 0
    paths = paths_of(specs_dir)
    assert paths.aggregate_json.exists() and not paths.verdict_json.exists()


# --- compare -----------------------------------------------------------------------------------------


def test_compare_table_prints_every_column_with_a_difference() -> None:
    rows = [
        Comparison(column="SlideVQA", difference=12.5, low=-1.25, high=30.0, p_value=0.04321, n_pairs=40),
        Comparison(column="T-1", difference=None, low=None, high=None, p_value=None, n_pairs=0),
        Comparison(column="overall_real", difference=-3.0, low=-4.0, high=-2.0, p_value=0.0002, n_pairs=7),
    ]
    assert format_table(rows, "r/a", "r/b") == (
        "r/a minus r/b (table points; 95% bootstrap interval; permutation p-value)\n"
        "column                        diff     low    high        p  pairs\n"
        "SlideVQA                     12.50   -1.25   30.00   0.0432     40\n"
        "overall_real                 -3.00   -4.00   -2.00   0.0002      7\n"
    )


def compare_args(specs_dir: Path, **changes: object) -> argparse.Namespace:  # noqa: F811
    fields = dict(run="t", run_b=None, model_a="random", model_b="other", mode=Mode.MULTI_IMAGE,
                  scorer="paper", resamples=10, seed=0, out=None, specs=specs_dir)  # fmt: skip
    return argparse.Namespace(**(fields | changes))


def test_compare_names_the_run_file_and_field_of_a_bad_model(specs_dir: Path) -> None:  # noqa: F811
    with pytest.raises(SpecError) as err:
        compare_command(compare_args(specs_dir))
    known = ", ".join(sorted(load_specs(specs_dir).run("t").models))
    assert str(err.value) == (
        f"{specs_dir}/runs/t.yaml: models: model 'other' is not part of run 't'; known: {known}"
    )


def test_compare_refuses_a_model_against_itself(specs_dir: Path) -> None:  # noqa: F811
    with pytest.raises(SpecError) as err:
        compare_command(compare_args(specs_dir, model_b=None))
    assert str(err.value) == f"{specs_dir}/runs: models: compare needs two different models or runs"


def test_compare_in_adversarial_mode_leaves_out_tasks_without_an_adversarial_set(
    specs_dir: Path,  # noqa: F811
    capsys: pytest.CaptureFixture,
) -> None:
    fill(specs_dir)
    second_run(specs_dir)
    out = specs_dir / "compare.json"
    assert (
        compare_command(compare_args(specs_dir, run_b="t2", model_b=None, mode=Mode.ADVERSARIAL, out=out))
        == 0
    )
    rows = {r["column"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["ActionSequence"]["difference"] == 0.0 and rows["ActionSequence"]["n_pairs"] == 3
    assert rows["TextNeedleInAHaystack"]["difference"] is None
    assert "TextNeedleInAHaystack" not in capsys.readouterr().out


# --- predictions of the official code ---------------------------------------------------------------


def test_imported_predictions_carry_no_time_and_a_key_per_record(setup) -> None:  # noqa: F811
    root, data, outputs = setup
    assert import_official(ns(root, outputs, data)) == 0
    preds = list(read_jsonl(paths_of(root).predictions("random", "ActionSequence", Mode.MULTI_IMAGE)))
    assert [(p["seconds"], p["mode"], p["task"]) for p in preds] == [
        (0.0, "multi-image", "ActionSequence")
    ] * 2
    keys = [p["cache_key"] for p in preds]
    assert len(set(keys)) == 2 and all(len(k) == len("official:") + 64 for k in keys)


def test_a_task_without_predictions_does_not_stop_the_import(setup) -> None:  # noqa: F811
    """Tasks are imported in spec order; ActionSequence comes first and has no pred.json here."""
    root, data, outputs = setup
    (outputs / "ActionSequence" / "pred.json").unlink()
    target = outputs / "Spot-the-Diff" / "pred.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps([official_record(0, "the car is gone", "the car is gone")]))
    assert import_official(ns(root, outputs, data)) == 0
    preds = list(read_jsonl(paths_of(root).predictions("random", "Spot-the-Diff", Mode.MULTI_IMAGE)))
    assert [(p["sample_id"], p["response"]) for p in preds] == [(0, "the car is gone")]


def test_adversarial_import_checks_against_the_adversarial_file(setup) -> None:  # noqa: F811
    """The needle task, listed first here, has no adversarial set: its pred.json is passed over."""
    root, data, outputs = setup
    run_path = root / "runs" / "t.yaml"
    tasks = ["TextNeedleInAHaystack", "ActionSequence", "Spot-the-Diff"]
    run_path.write_text(yaml.safe_dump({**yaml.safe_load(run_path.read_text()), "tasks": tasks}))
    needle = outputs / "TextNeedleInAHaystack" / "pred.json"
    needle.parent.mkdir(parents=True)
    needle.write_text(json.dumps([official_record(0, "needle", "needle")]))
    adv = data / "ActionSequence" / "ActionSequence-adv.json"
    (data / "ActionSequence" / "ActionSequence.json").rename(adv)
    args_ = ns(root, outputs, data)
    args_.mode = Mode.ADVERSARIAL
    assert import_official(args_) == 0
    paths = paths_of(root)
    preds = list(read_jsonl(paths.predictions("random", "ActionSequence", Mode.ADVERSARIAL)))
    assert [p["mode"] for p in preds] == ["adversarial"] * 2
    assert not paths.predictions("random", "TextNeedleInAHaystack", Mode.ADVERSARIAL).exists()


def test_each_task_is_judged_against_its_prepared_samples_where_they_exist(setup) -> None:  # noqa: F811
    """ActionSequence is not prepared: judged against the task JSON alone; Spot-the-Diff is prepared:
    judged against its prepared samples. One task's choice does not carry over to the other."""
    root, data, outputs = setup
    paths = paths_of(root)
    paths.prepared("ActionSequence", Mode.MULTI_IMAGE).unlink()
    atomic_write_jsonl(paths.prepared("Spot-the-Diff", Mode.MULTI_IMAGE),
                       [sample("Spot-the-Diff", 0, "the car is gone", None, 1, "Few")])  # fmt: skip
    target = outputs / "Spot-the-Diff" / "pred.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps([official_record(0, "the car is gone", "the car is gone")]))
    assert import_official(ns(root, outputs, data)) == 0
    action = json.loads(paths.task_score("random", "ActionSequence", Mode.MULTI_IMAGE).read_text())
    assert (action["prompt_rebuilt"], action["n"], action["missing_ids"]) == (False, 3, [2])
    assert action["score"] == pytest.approx(100 / 3)
    spot = json.loads(paths.task_score("random", "Spot-the-Diff", Mode.MULTI_IMAGE).read_text())
    assert (spot["prompt_rebuilt"], spot["n"]) == (True, 1)
    assert spot["score"] == pytest.approx(100.0, abs=1e-5)


def test_a_task_json_of_another_question_type_is_refused_by_name(setup) -> None:  # noqa: F811
    """Judged against the task JSON alone, a file whose question type is not the spec's is refused."""
    root, data, outputs = setup
    paths_of(root).prepared("ActionSequence", Mode.MULTI_IMAGE).unlink()
    source = data / "ActionSequence" / "ActionSequence.json"
    content = json.loads(source.read_text())
    content["meta_data"]["question_type"] = "open-ended"
    source.write_text(json.dumps(content))
    with pytest.raises(OfficialFormatError) as err:
        import_official(ns(root, outputs, data))
    assert str(err.value) == (
        f"{source}: meta_data.question_type open-ended differs from the task spec (multi-choice)"
    )


def test_the_task_json_alone_keeps_the_task_s_option_labels(setup) -> None:  # noqa: F811
    """A task whose options carry no letters: the standard scorer reads its answers by option text only,
    also when they are judged against the task JSON alone ("B" names no option there)."""
    root, data, outputs = setup
    spec_path = root / "tasks" / "ActionSequence.yaml"
    spec_path.write_text(yaml.safe_dump({**yaml.safe_load(spec_path.read_text()), "labelled_choices": False}))
    paths = paths_of(root)
    paths.prepared("ActionSequence", Mode.MULTI_IMAGE).unlink()
    assert import_official(ns(root, outputs, data)) == 0
    judgments = list(read_jsonl(paths.judgments("random", "ActionSequence", Mode.MULTI_IMAGE)))
    assert [j["extracted"] for j in judgments if j["scorer"] == "standard"] == [None, None, None]
    assert [j["prompt_rebuilt"] for j in judgments] == [False] * 6


def test_an_import_from_the_run_s_own_data_records_its_fetched_revision(setup) -> None:  # noqa: F811
    """Without --data-dir the task JSON is the run's fetched one: provenance names what fetch verified."""
    root, data, outputs = setup
    paths = paths_of(root)
    shutil.copytree(data, paths.data_root)
    manifest = {
        "source": {"kind": "hub", "revision": "r" * 40},
        "archives": [{"name": "a.tar", "sha256": "5" * 64}],
    }
    paths.fetch_manifest.write_text(json.dumps(manifest))
    args_ = ns(root, outputs, data)
    args_.data_dir = None
    assert import_official(args_) == 0
    record = read_provenance(paths.score_provenance("random", "ActionSequence", Mode.MULTI_IMAGE))
    assert record.data == DataRevision(kind="hub", revision="r" * 40, archives={"a.tar": "5" * 64})


def test_a_combined_image_import_is_judged_against_the_combined_regime_s_samples(setup) -> None:  # noqa: F811
    root, data, outputs = setup
    specs = load_specs(root)
    regime = model_regime(specs, specs.run("t"), "random", Mode.COMBINED_IMAGE)
    assert regime.id != UNLIMITED_REGIME
    paths = paths_of(root)
    golds = ["banana", "cherry", "apple"]
    prepared = [sample("ActionSequence", i, g, CHOICES, 1, "Few") | {"mode": "combined-image"}
                for i, g in enumerate(golds)]  # fmt: skip
    atomic_write_jsonl(paths.prepared("ActionSequence", Mode.COMBINED_IMAGE, regime.id), prepared)
    args_ = ns(root, outputs, data)
    args_.mode = Mode.COMBINED_IMAGE
    assert import_official(args_) == 0
    result = json.loads(paths.task_score("random", "ActionSequence", Mode.COMBINED_IMAGE).read_text())
    assert (result["prompt_rebuilt"], result["n"], result["missing_ids"]) == (True, 3, [2])


def test_a_record_of_an_unknown_sample_names_the_data_file(setup) -> None:  # noqa: F811
    root, data, outputs = setup
    (outputs / "ActionSequence" / "pred.json").write_text(json.dumps([official_record(9, "banana", "B")]))
    source = data / "ActionSequence" / "ActionSequence.json"
    with pytest.raises(OfficialFormatError) as err:
        import_official(ns(root, outputs, data))
    assert str(err.value) == f"{outputs}/ActionSequence/pred.json: record 0: sample_id 9 is not in {source}"


def test_an_unknown_model_names_the_run_file_and_field(setup) -> None:  # noqa: F811
    root, data, outputs = setup
    args = ns(root, outputs, data)
    args.model = "nobody"
    with pytest.raises(SpecError) as err:
        import_official(args)
    known = ", ".join(sorted(load_specs(root).run("t").models))
    assert (
        str(err.value) == f"{root}/runs/t.yaml: models: model 'nobody' is not part of run 't'; known: {known}"
    )


def test_invalid_json_names_the_file(setup) -> None:  # noqa: F811
    root, data, outputs = setup
    pred = outputs / "ActionSequence" / "pred.json"
    pred.write_text("[{")
    with pytest.raises(OfficialFormatError, match=rf"^{pred}: invalid JSON: "):
        import_official(ns(root, outputs, data))


def second_run(specs_dir: Path) -> None:  # noqa: F811
    """Run ``t2``: the same spec as ``t`` writing to the same folder, so both sides hold the same files."""
    run = yaml.safe_load((specs_dir / "runs" / "t.yaml").read_text())
    (specs_dir / "runs" / "t2.yaml").write_text(yaml.safe_dump({**run, "name": "t2"}))


def other_run(specs_dir: Path) -> RunPaths:  # noqa: F811
    """Run ``t2``: a copy of ``t`` in its own folder where every ActionSequence answer is "B" (right)."""
    run = yaml.safe_load((specs_dir / "runs" / "t.yaml").read_text())
    out2 = run["output_dir"] + "2"
    shutil.copytree(run["output_dir"], out2)
    (specs_dir / "runs" / "t2.yaml").write_text(yaml.safe_dump({**run, "name": "t2", "output_dir": out2}))
    paths2 = RunPaths.for_run(load_specs(specs_dir).run("t2"))
    answers = [prediction("ActionSequence", i, "B") for i in range(3)]
    atomic_write_jsonl(paths2.predictions("random", "ActionSequence", Mode.MULTI_IMAGE), answers)
    rescore = args(specs_dir, "ActionSequence")
    rescore.run = "t2"
    assert score(rescore) == 0
    return paths2


def test_compare_writes_what_was_compared_with_the_asked_seed(specs_dir: Path) -> None:  # noqa: F811
    fill(specs_dir)
    paths2 = other_run(specs_dir)
    out = specs_dir / "compare.json"
    args_ = compare_args(specs_dir, run_b="t2", model_b=None, resamples=200, seed=3, out=out)
    assert compare_command(args_) == 0
    written = json.loads(out.read_text())
    rows = written.pop("rows")
    assert written == {"a": "t/random", "b": "t2/random", "mode": "multi-image", "scorer": "paper",
                       "resamples": 200, "seed": 3}  # fmt: skip
    tasks = list(load_specs(specs_dir).tasks.values())
    a = RunFiles(paths_of(specs_dir)).samples("random", Mode.MULTI_IMAGE, tasks, "paper")
    b = RunFiles(paths2).samples("random", Mode.MULTI_IMAGE, tasks, "paper")
    assert rows == [r.model_dump(mode="json") for r in compare(a, b, tasks, 200, 3)]
    assert rows != [r.model_dump(mode="json") for r in compare(a, b, tasks, 200, 0)]  # the seed shows


def judged_alone(specs_dir: Path, run: str, task: str) -> None:  # noqa: F811
    """Run ``run`` has judgments of ``task`` alone, three samples in multi-image mode."""
    paths = RunPaths.for_run(load_specs(specs_dir).run(run))
    choices = CHOICES if task == "ActionSequence" else None
    gold = "banana" if choices else "the car is gone"
    prepared = [sample(task, i, gold, choices, 2, "Few") for i in range(3)]
    atomic_write_jsonl(paths.prepared(task, Mode.MULTI_IMAGE), prepared)
    atomic_write_jsonl(
        paths.predictions("random", task, Mode.MULTI_IMAGE), [prediction(task, i, "B") for i in range(3)]
    )
    rescore = args(specs_dir, task)
    rescore.run = run
    assert score(rescore) == 0


def test_compare_without_shared_samples_exits_1(
    specs_dir: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Run t judged ActionSequence only, run t2 (its own folder) Spot-the-Diff only: nothing to pair."""
    run = yaml.safe_load((specs_dir / "runs" / "t.yaml").read_text())
    (specs_dir / "runs" / "t2.yaml").write_text(
        yaml.safe_dump({**run, "name": "t2", "output_dir": run["output_dir"] + "2"})
    )
    judged_alone(specs_dir, "t", "ActionSequence")
    judged_alone(specs_dir, "t2", "Spot-the-Diff")
    with caplog.at_level(logging.ERROR):
        assert compare_command(compare_args(specs_dir, run_b="t2", model_b=None)) == 1
    assert caplog.messages[-1] == (
        "no task has samples judged on both sides (run the score stage for both first)"
    )


def test_compare_names_the_judgments_a_side_lacks(specs_dir: Path) -> None:  # noqa: F811
    run = yaml.safe_load((specs_dir / "runs" / "t.yaml").read_text())
    out2 = run["output_dir"] + "2"
    (specs_dir / "runs" / "t2.yaml").write_text(yaml.safe_dump({**run, "name": "t2", "output_dir": out2}))
    judged_alone(specs_dir, "t", "ActionSequence")
    with pytest.raises(MissingInput) as err:
        compare_command(compare_args(specs_dir, run_b="t2", model_b=None))
    assert str(err.value) == (
        f"{out2}/scores/random/multi-image/<Task>.jsonl: paper judgments not found; run "
        "`milebench score --run t2 --model random --task <Task> --mode multi-image` first"
    )


# --- a model's aggregate -----------------------------------------------------------------------------


def fail_first_sample(specs_dir: Path, tasks: tuple[str, ...], kind: FailureKind) -> None:  # noqa: F811
    """Sample 0 of each task's multi-image predictions fails with ``kind``; the task is scored again."""
    paths = paths_of(specs_dir)
    for task in tasks:
        path = paths.predictions("random", task, Mode.MULTI_IMAGE)
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        rows[0] = prediction(task, 0, None, kind)
        atomic_write_jsonl(path, rows)
        assert score(args(specs_dir, task)) == 0


def test_failures_of_a_kind_add_up_over_tasks(specs_dir: Path) -> None:  # noqa: F811
    fill(specs_dir)
    fail_first_sample(specs_dir, ("ActionSequence", "Spot-the-Diff"), FailureKind.TIMEOUT)
    fail_first_sample(specs_dir, ("TextNeedleInAHaystack",), FailureKind.OOM)
    allow(specs_dir)
    specs = load_specs(specs_dir)
    result = aggregate_run(specs, specs.run("t"), paths_of(specs_dir), resamples=10)
    multi = next(m for m in result.models if m.mode is Mode.MULTI_IMAGE)
    assert multi.failures == {FailureKind.TIMEOUT: 2, FailureKind.OOM: 1}


def test_the_standard_columns_are_the_standard_scorer_s(specs_dir: Path) -> None:  # noqa: F811
    fill(specs_dir)
    specs = load_specs(specs_dir)
    result = aggregate_run(specs, specs.run("t"), paths_of(specs_dir), resamples=10)
    multi, adversarial = result.models  # the run's modes in order: multi-image, adversarial
    assert (multi.mode, adversarial.mode) == (Mode.MULTI_IMAGE, Mode.ADVERSARIAL)
    # Multi-image answers "B" (right), "the car is gone" (no option named) and "A" (wrong); the needle holds
    # the answer "the car is gone" as a phrase, never as one word.
    assert multi.variants["standard"].columns["ActionSequence"] == pytest.approx(100 / 3)
    assert multi.variants["standard"].columns["TextNeedleInAHaystack"] == 0.0
    # Adversarial answers "A", "x", "A": all wrong; the needle task has no adversarial set.
    assert adversarial.variants["standard"].columns["ActionSequence"] == 0.0
    assert adversarial.variants["standard"].columns["TextNeedleInAHaystack"] is None
    assert adversarial.variants["standard"].difference == {"ActionSequence": 0.0, "Spot-the-Diff": 0.0}


def test_a_mode_without_judgments_has_no_standard_columns(specs_dir: Path) -> None:  # noqa: F811
    """Nothing judged in adversarial mode (an incomplete run that allows it): its standard columns are
    null, not a table of empty values."""
    fill(specs_dir)
    allow(specs_dir)
    paths = paths_of(specs_dir)
    for task in ("ActionSequence", "Spot-the-Diff"):
        paths.judgments("random", task, Mode.ADVERSARIAL).unlink()
        paths.task_score("random", task, Mode.ADVERSARIAL).unlink()
    specs = load_specs(specs_dir)
    multi, adversarial = aggregate_run(specs, specs.run("t"), paths, resamples=10).models
    assert adversarial.variants["standard"].columns is None
    assert multi.variants["standard"].columns is not None and multi.variants["standard"].columns[
        "ActionSequence"
    ] == pytest.approx(100 / 3)


def test_the_aggregate_intervals_have_the_asked_confidence(specs_dir: Path) -> None:  # noqa: F811
    """ActionSequence scores 1, 0, 0: the 95% interval of its mean spans 0 to 100, the 10% one hugs 33.3."""
    fill(specs_dir)
    specs = load_specs(specs_dir)
    wide, narrow = (
        next(m for m in aggregate_run(specs, specs.run("t"), paths_of(specs_dir), 2000, 0, c).models)
        for c in (0.95, 0.10)
    )
    assert (wide.columns["ActionSequence"].low, wide.columns["ActionSequence"].high) == (0.0, 100.0)
    assert (narrow.columns["ActionSequence"].low, narrow.columns["ActionSequence"].high) == pytest.approx(
        (100 / 3, 100 / 3)
    )


def estimate(value: float | None) -> Estimate:
    return Estimate(value=value, low=value, high=value)


def model_row(model: str, mode: Mode, overall_real: float | None) -> ModelAggregate:
    """Only what the contamination delta reads: the Overall Real. column."""
    return ModelAggregate.model_construct(
        model=model, mode=mode, columns={"overall_real": estimate(overall_real)}
    )


def test_contamination_delta_is_regular_minus_adversarial_per_model() -> None:
    rows = [
        model_row("only-adv", Mode.ADVERSARIAL, 30.0),
        model_row("a", Mode.MULTI_IMAGE, 50.0),
        model_row("a", Mode.ADVERSARIAL, 42.5),
        model_row("b", Mode.MULTI_IMAGE, 40.0),
        model_row("c", Mode.ADVERSARIAL, 20.0),
        model_row("c", Mode.MULTI_IMAGE, None),
    ]
    deltas = adversarial_deltas(rows)
    assert [(d.model, d.regular.value, d.adversarial.value, d.delta) for d in deltas] == [
        ("a", 50.0, 42.5, 7.5),
        ("c", None, 20.0, None),
    ]
    assert (
        adversarial_deltas([model_row("d", Mode.MULTI_IMAGE, 10.0), model_row("d", Mode.ADVERSARIAL, None)])[
            0
        ].delta
        is None
    )


# --- incomplete runs ---------------------------------------------------------------------------------


def test_every_incomplete_cell_is_listed_with_its_samples(specs_dir: Path) -> None:  # noqa: F811
    """The run lists the needle task first: it has no adversarial set, and the walk goes on past it."""
    path = specs_dir / "runs" / "t.yaml"
    run = yaml.safe_load(path.read_text())
    path.write_text(
        yaml.safe_dump({**run, "tasks": ["TextNeedleInAHaystack", "ActionSequence", "Spot-the-Diff"]})
    )
    fill(specs_dir)
    fail_first_sample(specs_dir, ("ActionSequence",), FailureKind.TIMEOUT)
    paths = paths_of(specs_dir)
    paths.task_score("random", "Spot-the-Diff", Mode.ADVERSARIAL).unlink()
    specs = load_specs(specs_dir)
    cells = incomplete_cells(specs.run("t"), specs.run_tasks(specs.run("t")), RunFiles(paths))
    assert cells == [
        IncompleteCell(model="random", task="ActionSequence", mode=Mode.MULTI_IMAGE, score_file=True,
                       failed_ids=(0,), failures={FailureKind.TIMEOUT: 1}),
        IncompleteCell(model="random", task="Spot-the-Diff", mode=Mode.ADVERSARIAL, score_file=False),
    ]  # fmt: skip
    with pytest.raises(IncompleteError) as err:
        require_complete(specs.run("t"), cells)
    assert str(err.value).startswith("run 't' has 2 incomplete cell(s); final tables are refused.")
    assert str(err.value).endswith(
        "\n  random/multi-image/ActionSequence: failed samples [0] (timeout: 1)"
        "\n  random/adversarial/Spot-the-Diff: no task score file"
    )


def test_a_cell_description_counts_the_ids_past_twenty() -> None:
    cell = IncompleteCell(model="m", task="T", mode=Mode.MULTI_IMAGE, score_file=True,
                          missing_ids=tuple(range(25)), failed_ids=(30, 31),
                          failures={FailureKind.OOM: 1, FailureKind.TIMEOUT: 1})  # fmt: skip
    shown = ", ".join(str(i) for i in range(20))
    assert cell.describe() == (
        f"m/multi-image/T: missing samples [{shown}, ... 5 more] failed samples [30, 31] (oom: 1, timeout: 1)"
    )
    twenty = cell.model_copy(update={"missing_ids": tuple(range(20)), "failed_ids": (), "failures": {}})
    assert twenty.describe() == f"m/multi-image/T: missing samples [{shown}]"


# --- the score command -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "mode", "problem"),
    [
        ("GPR1200", Mode.MULTI_IMAGE, "tasks: task 'GPR1200' is not part of run 't'; known: "),
        (
            "TextNeedleInAHaystack",
            Mode.ADVERSARIAL,
            "modes: task 'TextNeedleInAHaystack' has no adversarial set",
        ),
    ],
)
def test_score_names_the_run_file_and_field(specs_dir: Path, task: str, mode: Mode, problem: str) -> None:  # noqa: F811
    with pytest.raises(SpecError) as err:
        score(args(specs_dir, task, mode))
    specs = load_specs(specs_dir)
    run_tasks = ", ".join(sorted(t.name for t in specs.run_tasks(specs.run("t"))))
    assert str(err.value) == f"{specs_dir}/runs/t.yaml: {problem}" + (run_tasks if "known" in problem else "")
    bad = args(specs_dir, "ActionSequence")
    bad.model = "nobody"
    with pytest.raises(SpecError) as err:
        score(bad)
    known = ", ".join(sorted(specs.run("t").models))
    assert str(err.value) == (
        f"{specs_dir}/runs/t.yaml: models: model 'nobody' is not part of run 't'; known: {known}"
    )


def test_score_without_a_task_says_what_is_required(specs_dir: Path) -> None:  # noqa: F811
    no_task = args(specs_dir, "ActionSequence")
    no_task.task = None
    with pytest.raises(SystemExit) as err:
        score(no_task)
    assert str(err.value) == "milebench score: --task is required (or --official-outputs DIR)"


def test_score_reads_the_prepared_file_of_the_model_s_regime(specs_dir: Path) -> None:  # noqa: F811
    """A model with a context budget reads its own regime's file, not the unlimited one."""
    model = yaml.safe_load((specs_dir / "models" / "random.yaml").read_text())
    budgeted = {**model, "name": "budgeted", "adapter": "hf-llava", "max_context_len": 4096,
                "n_tokens_per_image": 576,
                "weights": {"kind": "hf", "repo_id": "org/model", "revision": "a" * 40}}  # fmt: skip
    (specs_dir / "models" / "budgeted.yaml").write_text(yaml.safe_dump(budgeted))
    run_path = specs_dir / "runs" / "t.yaml"
    run_path.write_text(yaml.safe_dump({**yaml.safe_load(run_path.read_text()), "models": ["budgeted"]}))
    specs = load_specs(specs_dir)
    regime = model_regime(specs, specs.run("t"), "budgeted", Mode.MULTI_IMAGE)
    assert regime.id != UNLIMITED_REGIME
    paths = paths_of(specs_dir)
    atomic_write_jsonl(paths.prepared("ActionSequence", Mode.MULTI_IMAGE, regime.id),
                       [sample("ActionSequence", 5, "banana", CHOICES, 2, "Few")])  # fmt: skip
    atomic_write_jsonl(paths.prepared("ActionSequence", Mode.MULTI_IMAGE), [])
    job = args(specs_dir, "ActionSequence")
    job.model = "budgeted"
    assert score(job) == 0
    result = json.loads(paths.task_score("budgeted", "ActionSequence", Mode.MULTI_IMAGE).read_text())
    assert (result["n"], result["missing_ids"]) == (1, [5])


def test_score_writes_its_provenance_beside_the_task_score(specs_dir: Path) -> None:  # noqa: F811
    paths = paths_of(specs_dir)
    atomic_write_jsonl(paths.prepared("ActionSequence", Mode.MULTI_IMAGE),
                       [sample("ActionSequence", 0, "banana", CHOICES, 2, "Few")])  # fmt: skip
    assert score(args(specs_dir, "ActionSequence")) == 0
    record = read_provenance(paths.score_provenance("random", "ActionSequence", Mode.MULTI_IMAGE))
    assert (record.stage, record.run, record.model, record.task, record.mode) == (
        "score", "t", "random", "ActionSequence", "multi-image"
    )  # fmt: skip
    assert record.outputs == (
        str(paths.judgments("random", "ActionSequence", Mode.MULTI_IMAGE)),
        str(paths.task_score("random", "ActionSequence", Mode.MULTI_IMAGE)),
        str(paths.samples("random", "ActionSequence", Mode.MULTI_IMAGE)),
    )
    assert record.prompt_rebuilt is True  # judged against the prepared samples


def test_score_without_prepared_samples_names_the_preprocess_command(specs_dir: Path) -> None:  # noqa: F811
    paths = paths_of(specs_dir)
    with pytest.raises(MissingInput) as err:
        score(args(specs_dir, "ActionSequence"))
    assert str(err.value) == (
        f"{paths.prepared('ActionSequence', Mode.MULTI_IMAGE)}: prepared samples not found; run `milebench "
        f"preprocess --run t --task ActionSequence --mode multi-image --regime {UNLIMITED_REGIME}` first"
    )


def test_score_reads_and_writes_under_the_root_it_is_given(
    specs_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_path = specs_dir / "runs" / "t.yaml"
    run_path.write_text(yaml.safe_dump({**yaml.safe_load(run_path.read_text()), "output_dir": "results/t"}))
    staged = tmp_path / "staged"
    paths = RunPaths.for_run(load_specs(specs_dir).run("t"), base=staged)
    atomic_write_jsonl(paths.prepared("ActionSequence", Mode.MULTI_IMAGE),
                       [sample("ActionSequence", 0, "banana", CHOICES, 2, "Few")])  # fmt: skip
    job = args(specs_dir, "ActionSequence")
    job.root = staged
    assert score(job) == 0
    assert paths.task_score("random", "ActionSequence", Mode.MULTI_IMAGE).is_file()


def test_score_logs_both_scorers_with_two_decimals(specs_dir: Path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    paths = paths_of(specs_dir)
    prepared = [sample("ActionSequence", i, "banana", CHOICES, 2, "Few") for i in range(3)]
    atomic_write_jsonl(paths.prepared("ActionSequence", Mode.MULTI_IMAGE), prepared)
    answers = [prediction("ActionSequence", 0, "B"), prediction("ActionSequence", 1, "A")]
    atomic_write_jsonl(paths.predictions("random", "ActionSequence", Mode.MULTI_IMAGE), answers)
    with caplog.at_level(logging.INFO, logger="milebench.benchmarks.milebench.score.commands"):
        assert score(args(specs_dir, "ActionSequence")) == 0
    line = "random ActionSequence multi-image: score 33.33 (standard 33.33) over 2/3 samples"
    assert f"{line} (1 missing, 0 failed)" in caplog.messages
    assert _points(None) == "n/a"


@pytest.mark.parametrize(
    ("response", "failure", "status"),
    [(None, None, "failed"), ("B", FailureKind.TIMEOUT, "failed"), ("B", None, "scored")],
)
def test_a_prediction_is_scored_only_with_a_response_and_no_failure(
    response: str | None, failure: FailureKind | None, status: str
) -> None:
    task = make_task("ActionSequence", "multi-choice")
    pred = Prediction.model_validate(prediction("ActionSequence", 0, response, failure))
    sample_ = PreparedSample.model_validate(sample("ActionSequence", 0, "banana", CHOICES, 2, "Few"))
    judgment = judge_sample(task, "random", sample_, pred)
    assert (judgment.status, judgment.failure) == (status, failure)
    assert judgment.score == (1.0 if status == "scored" else None)


def test_coverage_by_category_counts_the_tasks_of_each_mode(specs_dir: Path) -> None:  # noqa: F811
    """The needle task (diagnostic) has no adversarial set: the adversarial aggregate leaves it out."""
    fill(specs_dir)
    specs = load_specs(specs_dir)
    multi, adversarial = aggregate_run(specs, specs.run("t"), paths_of(specs_dir), resamples=10).models
    assert {c: (v.tasks_expected, v.samples_scored) for c, v in multi.coverage_by_category.items()} == {
        Category.REALISTIC_TEMPORAL: (1, 3),
        Category.REALISTIC_SEMANTIC: (1, 3),
        Category.DIAGNOSTIC: (1, 3),
    }
    assert {c: v.tasks_expected for c, v in adversarial.coverage_by_category.items()} == {
        Category.REALISTIC_TEMPORAL: 1,
        Category.REALISTIC_SEMANTIC: 1,
    }
    assert (adversarial.coverage.tasks_expected, adversarial.coverage.tasks_missing) == (2, 0)


def test_aggregate_defaults_to_2000_resamples_seeded_0(specs_dir: Path) -> None:  # noqa: F811
    fill(specs_dir)
    specs = load_specs(specs_dir)
    result = aggregate_run(specs, specs.run("t"), paths_of(specs_dir))
    assert (result.resamples, result.seed, result.confidence) == (2000, 0, 0.95)


def test_predictions_of_unknown_samples_are_ignored_with_a_warning(
    specs_dir: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    paths = paths_of(specs_dir)
    prepared = [sample("ActionSequence", 0, "banana", CHOICES, 2, "Few")]
    atomic_write_jsonl(paths.prepared("ActionSequence", Mode.MULTI_IMAGE), prepared)
    answers = [prediction("ActionSequence", i, "B") for i in (0, 8, 9)]
    atomic_write_jsonl(paths.predictions("random", "ActionSequence", Mode.MULTI_IMAGE), answers)
    with caplog.at_level(logging.WARNING, logger="milebench.benchmarks.milebench.score.commands"):
        assert score(args(specs_dir, "ActionSequence")) == 0
    assert "random/multi-image/ActionSequence: ignoring predictions of unknown sample ids [8, 9]" in (
        caplog.messages
    )
    result = json.loads(paths.task_score("random", "ActionSequence", Mode.MULTI_IMAGE).read_text())
    assert (result["n"], result["score"]) == (1, 100.0)


def test_combined_image_scoring_reads_the_combined_regime(specs_dir: Path) -> None:  # noqa: F811
    set_modes(specs_dir, ["multi-image", "combined-image"])
    specs = load_specs(specs_dir)
    regime = model_regime(specs, specs.run("t"), "random", Mode.COMBINED_IMAGE)
    assert regime.id != UNLIMITED_REGIME
    paths = paths_of(specs_dir)
    row = sample("ActionSequence", 3, "banana", CHOICES, 2, "Few") | {"mode": "combined-image"}
    atomic_write_jsonl(paths.prepared("ActionSequence", Mode.COMBINED_IMAGE, regime.id), [row])
    assert score(args(specs_dir, "ActionSequence", Mode.COMBINED_IMAGE)) == 0
    result = json.loads(paths.task_score("random", "ActionSequence", Mode.COMBINED_IMAGE).read_text())
    assert (result["n"], result["missing_ids"]) == (1, [3])
