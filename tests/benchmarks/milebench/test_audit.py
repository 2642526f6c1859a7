"""``milebench audit``: batch invariance and environment drift, measured against planted perturbations
whose rate is known, and on the tiny LLaVA through the real transformers path."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from milebench.audit.batch import batch_audit, compare_sample, first_divergence
from milebench.audit.stats import wilson_rate
from milebench.audit.trace import Trace, row_length, traced
from milebench.benchmarks.milebench.audit.answer_score import answer_score
from milebench.benchmarks.milebench.fixture.prepared import prepared_fixture
from milebench.benchmarks.milebench.infer.oracle import OracleAdapter
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import regime_for
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.score.commands import score_task, write_scores
from milebench.benchmarks.milebench.score.normalize import normalize
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.cli import main
from milebench.infer.engine import run_model
from milebench.infer.records import Prediction
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.io import atomic_write_jsonl, read_jsonl
from milebench.score.registry import scorer
from milebench.spec.model_execution import for_run

TASKS = ("ActionLocalization", "CharacterOrder", "ActionSequence")
"""Multi-choice tasks: the oracle scores 1 on each sample, another choice 0."""
PER_TASK = 10


@pytest.fixture(scope="module")
def specs() -> Specs:
    return load_specs()


def planted(sample: PreparedSample) -> bool:
    """One sample in ten: the fixture numbers each task's samples 0..n-1."""
    return sample.sample_id % 10 == 0


def other_choice(sample: PreparedSample) -> str:
    assert sample.choices is not None
    return next(c for c in sample.choices if normalize(c) != normalize(sample.response))


class OneInTenBackend(OracleAdapter):
    """The oracle, except that one sample in ten gets another choice: always (``in_batches=False``), or
    only when it shares its batch with other samples."""

    def __init__(self, in_batches: bool) -> None:
        self.in_batches = in_batches

    def generate(self, samples: Sequence[PreparedSample]) -> list[str]:
        perturbed = not self.in_batches or len(samples) > 1
        return [other_choice(s) if perturbed and planted(s) else s.response for s in samples]


def test_wilson_interval_known_values() -> None:
    """3 of 30 (Wilson 1927; statsmodels' proportion_confint gives the same), and 0 of 30, whose
    interval still reaches above 0 where the normal approximation collapses to a point."""
    rate = wilson_rate(3, 30)
    assert rate.rate == pytest.approx(0.1)
    assert (rate.low, rate.high) == (pytest.approx(0.034600, abs=1e-6), pytest.approx(0.256211, abs=1e-6))
    none = wilson_rate(0, 30)
    assert none.low == 0 and none.high == pytest.approx(0.113513, abs=1e-6)
    assert wilson_rate(0, 0).rate is None


def test_first_divergence_and_answer_length() -> None:
    assert first_divergence([5, 6, 7], [5, 6, 7]) is None
    assert first_divergence([5, 6, 7], [5, 9, 7]) == 1
    assert first_divergence([5, 6], [5, 6, 2]) == 2, "a run that goes on where the other ended parts there"
    assert row_length([7, 2, 3, 3], eos={2}, pad=3) == 2, "up to and including the end of sequence"
    assert row_length([7, 8, 3, 3], eos={2}, pad=3) == 2, "a finished row's padding is not answer"
    assert row_length([7, 8, 2, 2], eos={2}, pad=2) == 3


def test_divergence_names_the_step_and_tells_near_ties_from_real_changes(
    fixture_samples: tuple[RunPaths, dict[str, list[PreparedSample]]],
) -> None:
    """Two repeats part from the reference at steps 2 and 1: the earliest counts, with the reference's
    margin there; a margin below the tie margin is a near-tie, one at it is not."""
    _, by_task = fixture_samples
    sample = by_task[TASKS[0]][1]
    reference = Trace(text="ab", tokens=(5, 6, 7), margins=(3.0, 0.05, 0.01))
    late = Trace(text="ax", tokens=(5, 6, 9), margins=(3.0, 0.05, 0.02))
    early = Trace(text="ay", tokens=(5, 8, 9), margins=(3.0, 0.04, 0.5))

    def score(text: str | None) -> float:
        return float(text == "ab")

    change = compare_sample(sample, reference, [late, early], 4, score, tie_margin=0.05)
    assert (change.text_changes, change.score_changes) == (2, 2)
    assert (change.first_divergence, change.reference_margin, change.margin) == (1, 0.05, 0.04)
    assert change.near_tie is False, "a margin at the tie margin is a real change"
    assert compare_sample(sample, reference, [late], 4, score, tie_margin=0.05).near_tie is True
    same = compare_sample(sample, reference, [reference], 4, score, tie_margin=0.05)
    assert (same.text_changes, same.first_divergence, same.near_tie) == (0, None, None)


@pytest.fixture(scope="module")
def fixture_samples(
    specs: Specs, tmp_path_factory: pytest.TempPathFactory
) -> tuple[RunPaths, dict[str, list[PreparedSample]]]:
    root = tmp_path_factory.mktemp("fixture")
    paths = RunPaths(out=root, reports=root / "reports")
    return paths, prepared_fixture(paths, [specs.tasks[t] for t in TASKS], PER_TASK)


def test_batch_audit_reports_a_planted_batch_effect(
    specs: Specs, fixture_samples: tuple[RunPaths, dict[str, list[PreparedSample]]]
) -> None:
    """A backend that changes one answer in ten whenever the sample shares its batch: at batch size 1
    (repeated) nothing changes, at 4 exactly one sample in ten, in every task and pooled."""
    _, by_task = fixture_samples
    samples = [s for rows in by_task.values() for s in rows]
    backend = OneInTenBackend(in_batches=True)
    summary, changes = batch_audit(
        lambda batch: traced(backend, batch),
        samples,
        answer_score(specs.tasks, scorer("paper")),
        (1, 4),
        repeats=2,
    )
    rates = {(row.task, row.batch_size): row for row in summary}
    for task in (*TASKS, "all"):
        n = PER_TASK * (len(TASKS) if task == "all" else 1)
        assert rates[task, 1].texts.changed == 0 and rates[task, 1].scores.changed == 0
        assert rates[task, 4].texts.total == n
        assert rates[task, 4].texts.rate == pytest.approx(0.1)
        assert rates[task, 4].scores.rate == pytest.approx(0.1)
    changed = [c for c in changes if c.text_changes]
    assert {(c.task, c.sample_id) for c in changed} == {(t, 0) for t in TASKS}
    assert all(c.batch_size == 4 and c.text_changes == 2 == c.score_changes for c in changed)
    assert all((c.reference_score, c.changed_score) == (1.0, 0.0) for c in changed)


def answer_and_score(
    specs: Specs, paths: RunPaths, by_task: dict[str, list[PreparedSample]], backend: OracleAdapter
) -> None:
    """Predictions through the engine and judgments through the score stage, as a run writes them."""
    spec = specs.models["random"]
    for task, samples in by_task.items():
        out = paths.predictions(spec.name, task, Mode.MULTI_IMAGE)
        run_model(backend, spec, samples, out)
        preds = {p.sample_id: p for p in map(Prediction.model_validate, read_jsonl(out))}
        write_scores(paths, *score_task(specs.tasks[task], spec.name, Mode.MULTI_IMAGE, samples, preds))


def test_drift_audit_reports_a_planted_backend(
    specs: Specs,
    fixture_samples: tuple[RunPaths, dict[str, list[PreparedSample]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Environment B changes one answer in ten: flips and changed texts at 10% per task and pooled (3 of
    30), each task 10 points lower, and the tables printed and written."""
    _, by_task = fixture_samples
    run = specs.run("smoke")
    for root, planted_backend in (("a", False), ("b", True)):
        paths = RunPaths.for_run(run, base=tmp_path / root)
        backend = (
            OneInTenBackend(in_batches=False)
            if planted_backend
            else OracleAdapter(specs.models["random"], paths, paths.data_root)
        )
        answer_and_score(specs, paths, by_task, backend)
    out = tmp_path / "drift.json"
    argv = ["audit", "drift", "--run", "smoke", "--model-a", "random", "--root", str(tmp_path / "a")]
    assert main([*argv, "--root-b", str(tmp_path / "b"), "--resamples", "500", "--out", str(out)]) == 0
    audit = json.loads(out.read_text())
    rows = {row["task"]: row for row in audit["tasks"]}
    assert set(rows) == {*TASKS, "all"}
    for task in TASKS:
        assert rows[task]["flips"]["changed"] == 1 and rows[task]["flips"]["total"] == PER_TASK
        assert rows[task]["texts"]["rate"] == pytest.approx(0.1)
        comparison = rows[task]["comparison"]
        assert comparison["difference"] == pytest.approx(10.0)
        assert comparison["low"] <= 10.0 <= comparison["high"]
    assert (rows["all"]["flips"]["changed"], rows["all"]["flips"]["total"]) == (3, 30)
    assert rows["all"]["texts"]["rate"] == pytest.approx(0.1)
    assert {(f["task"], f["sample_id"]) for f in audit["changed"]} == {(t, 0) for t in TASKS}
    table = capsys.readouterr().out
    assert "| all | - | - | - | 3/30 = 10.0% [3.5, 25.6] | 3/30 = 10.0% [3.5, 25.6] |" in table
    assert out.with_suffix(".md").read_text() == table


def test_drift_audit_reports_samples_fed_other_input_tokens(
    specs: Specs, fixture_samples: tuple[RunPaths, dict[str, list[PreparedSample]]], tmp_path: Path
) -> None:
    """The same answers from both sides, but B counted one more input token on one sample per task (its
    engine expanded an image to another token count): 1 in 10 per task, 3 of 30 pooled, no flip; samples
    a side did not count (None) are left out of the rate."""
    _, by_task = fixture_samples
    run = specs.run("smoke")
    for root in ("a", "b"):
        paths = RunPaths.for_run(run, base=tmp_path / root)
        answer_and_score(specs, paths, by_task, OracleAdapter(specs.models["random"], paths, paths.data_root))
        for task in TASKS:
            path = paths.predictions("random", task, Mode.MULTI_IMAGE)
            rows = list(read_jsonl(path))
            for row in rows:
                row["input_tokens"] = 100 + (root == "b" and row["sample_id"] == 1)
            rows[-1]["input_tokens"] = None if root == "a" else rows[-1]["input_tokens"]
            atomic_write_jsonl(path, rows)
    out = tmp_path / "drift.json"
    argv = ["audit", "drift", "--run", "smoke", "--model-a", "random", "--root", str(tmp_path / "a")]
    assert main([*argv, "--root-b", str(tmp_path / "b"), "--resamples", "100", "--out", str(out)]) == 0
    rows = {row["task"]: row for row in json.loads(out.read_text())["tasks"]}
    for task in TASKS:
        assert (rows[task]["inputs"]["changed"], rows[task]["inputs"]["total"]) == (1, PER_TASK - 1)
        assert rows[task]["flips"]["changed"] == 0 and rows[task]["texts"]["changed"] == 0
    assert (rows["all"]["inputs"]["changed"], rows["all"]["inputs"]["total"]) == (3, 3 * (PER_TASK - 1))
    assert "| 3/27 = 11.1% [3.9, 28.1] |" in out.with_suffix(".md").read_text()


def test_drift_needs_two_sides(tmp_path: Path) -> None:
    argv = ["audit", "drift", "--run", "smoke", "--model-a", "random", "--root", str(tmp_path)]
    assert main(argv) == 2


def write_prepared(
    specs: Specs, paths: RunPaths, model: str, tasks: list[TaskSpec], per_task: int
) -> dict[str, list[PreparedSample]]:
    """The fixture prepared for ``model``'s regime in the smoke run, written where infer reads it."""
    run = specs.run("smoke")
    regime = regime_for(specs.models[model], run, Mode.MULTI_IMAGE, specs.root)
    prepared = prepared_fixture(paths, tasks, per_task, regime=regime)
    for task, samples in prepared.items():
        path = paths.prepared(task, Mode.MULTI_IMAGE, regime.id)
        atomic_write_jsonl(path, [s.model_dump(mode="json") for s in samples])
    return prepared


def test_batch_audit_on_the_tiny_llava(specs: Specs, tmp_path: Path) -> None:
    """The real transformers path, batched variant: every answer carries its ids and step margins; the
    recording leaves the answers as the adapter gives them; repeated runs at batch size 1 do not change
    on the CPU; every divergence found names the reference's margin there."""
    run = specs.run("smoke")
    paths = RunPaths.for_run(run, base=tmp_path)
    build_tiny(specs.models["tiny-llava"], paths.model_dir("tiny-llava"))
    tasks = [specs.tasks[t] for t in TASKS[:2]]
    prepared = write_prepared(specs, paths, "tiny-llava", tasks, 2)
    samples = [s for rows in prepared.values() for s in rows]
    spec = for_run(specs.models["tiny-llava"], run)
    assert spec.execution is not None
    adapter = load_adapter(
        spec.model_copy(update={"execution": spec.execution.with_variant("batched")}), paths, paths.data_root
    )
    traces = traced(adapter, samples)
    assert [t.text for t in traces] == adapter.generate(samples)
    assert all(t.tokens and t.margins and len(t.tokens) == len(t.margins) for t in traces)
    assert all(m >= 0 for t in traces for m in t.margins or ())

    out = tmp_path / "batch.json"
    argv = ["audit", "batch", "--run", "smoke", "--root", str(tmp_path), "--model", "tiny-llava"]
    argv += ["--task", TASKS[0], "--task", TASKS[1], "--variant", "batched", "--batch-sizes", "1,2"]
    assert main([*argv, "--repeats", "1", "--out", str(out)]) == 0
    audit = json.loads(out.read_text())
    assert audit["execution"] == "batched"
    rows = {(row["task"], row["batch_size"]): row for row in audit["summary"]}
    assert set(rows) == {(t, n) for t in (*TASKS[:2], "all") for n in (1, 2)}
    assert rows["all", 1]["texts"] == {
        "changed": 0,
        "total": 4,
        "rate": 0.0,
        "low": 0.0,
        "high": pytest.approx(0.490, abs=1e-3),
    }
    assert rows["all", 2]["texts"]["total"] == 4
    for change in audit["samples"]:
        if change["first_divergence"] is not None:
            assert change["reference_margin"] is not None
            assert change["near_tie"] == (change["reference_margin"] < 0.05)
    assert "| all | 2 |" in out.with_suffix(".md").read_text()
