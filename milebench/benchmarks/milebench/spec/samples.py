"""How many samples a task's cells should hold in a run: the spec's count (a fixture's own), at most the
run's limit. Coverage, preprocessing and imports all count by it."""

from __future__ import annotations

import logging
from pathlib import Path

from milebench.benchmarks.milebench.spec.run import FixtureSource, RunSpec
from milebench.benchmarks.milebench.spec.task import TaskSpec

log = logging.getLogger(__name__)


def spec_samples(task: TaskSpec, run: RunSpec) -> int:
    """The samples ``task``'s file should hold in ``run``: the spec's count, a fixture's own."""
    return run.data.samples_per_task if isinstance(run.data, FixtureSource) else task.n_samples


def expected_samples(task: TaskSpec, run: RunSpec) -> int:
    """The samples a cell of ``task`` should have in ``run``: the file's count, at most the run's
    ``limit``; coverage counts these whatever the file holds."""
    n = spec_samples(task, run)
    return n if run.limit is None else min(n, run.limit)


def warn_if_short(task: TaskSpec, run: RunSpec, n: int, source: Path) -> None:
    """A task file with fewer samples than the spec says is read, and said so: its cells are
    incomplete, never complete on part of the task."""
    expected = spec_samples(task, run)
    if n < expected:
        log.warning(
            "%s: %d samples, the task spec says %d; coverage counts the %d, so the task's cells are "
            "incomplete (a cut or partial download?)",
            source,
            n,
            expected,
            expected,
        )
