"""The verdict's two boundaries: a difference equal to the tolerance passes, and the published value
counts as inside our interval when it is within the 0.05 its printed rounding allows."""

from __future__ import annotations

import numpy as np
import pytest

from milebench.score.uncertainty import TaskSamples
from milebench.score.verdict import VerdictCell, build_verdict
from milebench.spec.registry import load_specs
from milebench.spec.run import FixtureSource, RunSpec
from milebench.spec.task import Group

SPECS = load_specs()
TASKS = list(SPECS.tasks.values())
ROW = next(r for r in SPECS.paper.main_table.rows if r.model == "vila")
GROUPS = [g.value for g in Group]


def constant(value: float, n: int = 10) -> TaskSamples:
    """n samples all scoring ``value`` (table points / 100): the interval is the single point."""
    return TaskSamples(ids=tuple(range(n)), scores=np.full(n, value / 100), n_expected=n)


def group_cells(offset: float, tolerance: float = 1.0) -> list[VerdictCell]:
    """Every task scores its group's printed value + ``offset`` points; the twelve group cells."""
    samples = {t.name: constant(ROW.groups[t.group] + offset) for t in TASKS}
    run = RunSpec(name="v", description="d", models=("vila",), data=FixtureSource(kind="fixture"),
                  tolerance=tolerance)  # fmt: skip
    verdict = build_verdict(run, SPECS.paper, TASKS, {"vila": samples}, resamples=20)
    cells = [c for c in verdict.cells if c.column in GROUPS]
    assert len(cells) == 12
    return cells


@pytest.mark.parametrize(("offset", "passed"), [(1.0, True), (-1.0, True), (1.1, False), (-1.1, False)])
def test_a_difference_equal_to_the_tolerance_passes(offset: float, passed: bool) -> None:
    cells = group_cells(offset)
    assert [c.difference for c in cells] == pytest.approx([offset] * 12, abs=1e-9)
    assert [c.passed for c in cells] == [passed] * 12


def test_an_exact_reproduction_passes_a_zero_tolerance() -> None:
    assert [c.passed for c in group_cells(0.0, tolerance=0.0)] == [True] * 12
    assert [c.passed for c in group_cells(0.1, tolerance=0.0)] == [False] * 12


@pytest.mark.parametrize(
    ("offset", "inside"), [(0.04, True), (-0.04, True), (0.06, False), (-0.06, False), (0.0, True)]
)
def test_the_interval_is_widened_by_the_printed_rounding(offset: float, inside: bool) -> None:
    """Our interval is the point published + offset; a printed value stands for anything within 0.05."""
    cells = group_cells(offset)
    assert [c.ci_low for c in cells] == pytest.approx([c.published + offset for c in cells], abs=1e-9)
    assert [c.ci_high for c in cells] == pytest.approx([c.published + offset for c in cells], abs=1e-9)
    assert [c.published_in_interval for c in cells] == [inside] * 12
