"""A model that loads weights is loaded once per (model, mode): one ``milebench infer`` answers every task
given, with the same predictions as one process per task, each cell with its own predictions, journal and
provenance; killed in the middle, its rerun answers every sample exactly once. The DAG has one such job
per (model, mode) (tests/test_snakefile.py; API models too: tests/test_infer_api_jobs.py), and one job per
cell for the built-in baselines."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from prepared_runs import fixture_run, journal_lines, kill_once_answered, prepare_run, run_paths
from prepared_runs import infer_argv as infer_job

from milebench import cli
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.provenance import read_provenance
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.infer import registry

REPO = Path(__file__).resolve().parents[1]
RUN = "once"
MODEL = "tiny-llava"
TASKS = ["ActionSequence", "GPR1200", "MMCoQA"]
"""GPR1200 and MMCoQA are answered one sample per batch (official batching), so a kill lands mid-task."""
SAMPLES = 4
MODE = "multi-image"
DEADLINE_S = 120.0
"""Upper bound on waiting for the killed job: a guard against hanging, not a timing assertion."""

SLOW_CHILD = textwrap.dedent(
    """
    import sys, time
    from milebench import cli
    from milebench.infer import registry

    load = registry.load_adapter

    def slow_load(*args, **kwargs):
        adapter = load(*args, **kwargs)
        generate = adapter.generate

        def slow(batch):
            time.sleep(0.5)
            return generate(batch)

        adapter.generate = slow
        return adapter

    registry.load_adapter = slow_load
    sys.exit(cli.main(sys.argv[1:]))
    """
)
"""``milebench infer`` with each batch half a second slower, so it can be killed between two batches."""


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the tiny LLaVA on three fixture tasks, fetched and prepared by the kit's own commands."""
    run = fixture_run(RUN, [MODEL, "random"], TASKS, MODE, SAMPLES)
    return prepare_run(tmp_path_factory.mktemp("once"), run, MODEL)


def copy_run(prepared: Path, into: Path) -> Path:
    """A fresh copy of the prepared run (no answers yet)."""
    shutil.copytree(prepared, into, symlinks=True)
    return into


def infer_argv(root: Path, tasks: Sequence[str]) -> list[str]:
    return infer_job(root, RUN, MODEL, tasks, MODE)


def paths_of(root: Path) -> RunPaths:
    return run_paths(root, RUN)


def answers(root: Path, task: str) -> list[dict[str, Any]]:
    """A cell's predictions, each without the time it took (the only field that differs run to run)."""
    path = paths_of(root).predictions(MODEL, task, MODE)
    return [
        {k: v for k, v in json.loads(line).items() if k != "seconds"}
        for line in path.read_text().splitlines()
    ]


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Models loaded in this process, by name; each answered sample is noted too (under ``task/id``)."""
    counts: Counter[str] = Counter()
    load: Callable[..., Any] = registry.load_adapter

    def counting_load(spec: Any, *args: Any, **kwargs: Any) -> Any:
        counts[spec.name] += 1
        adapter = load(spec, *args, **kwargs)
        generate = adapter.generate

        def noting(batch: Sequence[PreparedSample]) -> Any:
            counts.update(f"{s.task}/{s.sample_id}" for s in batch)
            return generate(batch)

        adapter.generate = noting
        return adapter

    monkeypatch.setattr(registry, "load_adapter", counting_load)
    yield counts


def test_one_process_answers_every_task_as_one_process_per_task_does(
    prepared: Path, tmp_path: Path, loads: Counter[str]
) -> None:
    per_cell = copy_run(prepared, tmp_path / "per-cell")
    for task in TASKS:
        assert cli.main(infer_argv(per_cell, [task])) == 0
    assert loads[MODEL] == len(TASKS)

    loads.clear()
    once = copy_run(prepared, tmp_path / "once")
    assert cli.main(infer_argv(once, TASKS)) == 0
    assert loads[MODEL] == 1, "one load for every task of the mode"
    assert sum(n for key, n in loads.items() if "/" in key) == SAMPLES * len(TASKS)

    for task in TASKS:
        assert answers(once, task) == answers(per_cell, task)
        assert [a["sample_id"] for a in answers(once, task)] == list(range(SAMPLES))
        paths = paths_of(once)
        record = read_provenance(paths.infer_provenance(MODEL, task, MODE))
        assert (record.task, record.mode, record.model) == (task, MODE, MODEL)
        assert record.outputs == (str(paths.relative(paths.predictions(MODEL, task, MODE))),)


def test_a_task_that_cannot_run_is_named_and_the_others_are_answered(
    prepared: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = copy_run(prepared, tmp_path / "run")
    paths = paths_of(root)
    specs = load_specs(root / "specs")
    regime = model_regime(specs, specs.run(RUN), MODEL, Mode(MODE)).id
    broken = paths.prepared("GPR1200", MODE, regime)
    broken.write_text("not a prepared sample\n")
    assert cli.main(infer_argv(root, TASKS)) == 1
    assert str(broken) in caplog.text
    assert not paths.predictions(MODEL, "GPR1200", MODE).exists()
    for task in ("ActionSequence", "MMCoQA"):
        assert [a["sample_id"] for a in answers(root, task)] == list(range(SAMPLES))


def test_sigkill_mid_way_then_rerun_answers_every_sample_exactly_once(
    prepared: Path, tmp_path: Path, loads: Counter[str]
) -> None:
    reference = copy_run(prepared, tmp_path / "reference")
    assert cli.main(infer_argv(reference, TASKS)) == 0
    loads.clear()

    root = copy_run(prepared, tmp_path / "killed")
    paths = paths_of(root)
    journals = {task: paths.journal(MODEL, task, MODE) for task in TASKS}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-c", SLOW_CHILD, *infer_argv(root, TASKS)]
    kill_once_answered(argv, journals["GPR1200"], env, DEADLINE_S)
    kept = {task: journal_lines(journals[task]) for task in TASKS}
    assert kept["ActionSequence"] == SAMPLES and 1 <= kept["GPR1200"] < SAMPLES and kept["MMCoQA"] == 0, kept
    assert paths.predictions(MODEL, "ActionSequence", MODE).exists()
    assert not paths.predictions(MODEL, "GPR1200", MODE).exists()

    assert cli.main(infer_argv(root, TASKS)) == 0
    answered = [key for key in loads if "/" in key]
    assert all(loads[key] == 1 for key in answered), "no sample answered twice"
    assert not any(key.startswith("ActionSequence/") for key in answered), "a finished task is reused"
    assert len(answered) == SAMPLES * len(TASKS) - SAMPLES - kept["GPR1200"]
    for task in TASKS:
        assert answers(root, task) == answers(reference, task)
