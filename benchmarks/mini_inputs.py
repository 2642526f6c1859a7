"""Benchmark inputs: the generated mini-MileBench, prepared by the kit's own preprocess code.

Both benchmarks measure on samples built exactly as a run builds them (upstream JSON layout, official
prompt building, the model's truncation budget), so the numbers describe the real code paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from milebench.fixture.generate import write_tree
from milebench.paths import RunPaths
from milebench.preprocess.commands import read_task_file, task_source
from milebench.preprocess.prepare import load_budget, prepare_task
from milebench.preprocess.regime import UNLIMITED, Regime
from milebench.records import PreparedSample
from milebench.spec.run import Mode
from milebench.spec.task import TaskSpec

FILLER_WORDS = (
    *("the", "red", "cube", "moves", "left", "while", "a", "small", "blue", "sphere", "stays", "on"),
    *("the", "table", "near", "the", "door"),
)
"""Words for synthetic prompt text and long answers."""


def prepared_fixture(
    paths: RunPaths,
    tasks: Sequence[TaskSpec],
    samples_per_task: int,
    seed: int = 0,
    regime: Regime = UNLIMITED,
    mode: Mode = Mode.MULTI_IMAGE,
) -> dict[str, list[PreparedSample]]:
    """Write the fixture under ``paths`` and prepare every task of it for ``regime``; task -> samples.

    A budgeted regime loads its tokenizer from ``paths`` (build a tiny model there first).
    """
    write_tree(paths.data_root.parent, tasks, seed, samples_per_task)
    budget = load_budget(regime, paths)
    prepared = {}
    for task in tasks:
        source = task_source(task, mode, paths.data_root)
        task_file = read_task_file(source)
        prepared[task.name] = prepare_task(
            task, task_file, source, mode, regime, budget, paths, skip_bad=False
        ).samples
    return prepared


def bench_paths(root: Path) -> RunPaths:
    """A run layout inside a scratch folder."""
    return RunPaths(out=root / "out", reports=root / "reports")
