"""The verdict sets each reproduced main-table cell beside the published one, with flags and ranks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from milebench.score.uncertainty import TaskSamples
from milebench.score.verdict import COLUMNS, Verdict, build_verdict, inconsistent_cells, rank_correlation
from milebench.spec.base import load_spec
from milebench.spec.paper import PaperSpec
from milebench.spec.registry import load_specs
from milebench.spec.run import FixtureSource, RunSpec
from milebench.spec.task import Group

SPECS = Path(__file__).resolve().parents[1] / "specs"


@pytest.fixture(scope="module")
def paper() -> PaperSpec:
    return load_spec(SPECS / "paper.yaml", PaperSpec)


@pytest.fixture(scope="module")
def tasks():
    return list(load_specs(SPECS).tasks.values())


def exact(fraction: float, n: int = 1000) -> TaskSamples:
    """n samples whose mean is ``fraction`` (to 1/n)."""
    k = round(fraction * n)
    return TaskSamples(
        ids=tuple(range(n)), scores=np.array([1.0] * k + [0.0] * (n - k)), n_expected=n, n_scored=n
    )


def samples_for(paper: PaperSpec, tasks, model: str, shift: float = 0.0) -> dict[str, TaskSamples]:
    """Every task of a group scores the group's printed value (+ shift points)."""
    row = next(r for r in paper.main_table.rows if r.model == model)
    return {t.name: exact((row.groups[t.group] + shift) / 100) for t in tasks}


def run(models: tuple[str, ...], tolerance: float = 1.0) -> RunSpec:
    return RunSpec(
        name="v", description="d", models=models, data=FixtureSource(kind="fixture"), tolerance=tolerance
    )


def test_cells_compare_ours_with_the_printed_values(paper: PaperSpec, tasks) -> None:
    samples = {"vila": samples_for(paper, tasks, "vila", shift=0.5), "oracle": {}}
    verdict = build_verdict(run(("vila", "oracle")), paper, tasks, samples, resamples=200)
    assert isinstance(verdict, Verdict)
    assert len(verdict.cells) == len(COLUMNS)  # the oracle has no published row
    cells = {c.column: c for c in verdict.cells}
    t1 = cells["T-1"]
    vila = next(r for r in paper.main_table.rows if r.model == "vila")
    assert t1.published == vila.groups[Group.T1]
    assert t1.difference == pytest.approx(0.5, abs=0.051)
    assert t1.passed and t1.coverage == 1.0
    assert t1.ci_low < t1.ours < t1.ci_high
    assert cells["overall_real"].passed
    assert verdict.n_passed == len(COLUMNS) and verdict.n_failed == 0


def test_tolerance_decides_pass_and_missing_tasks_are_unreproduced(paper: PaperSpec, tasks) -> None:
    samples = samples_for(paper, tasks, "vila", shift=2.0)
    del samples["GPR1200"]
    verdict = build_verdict(run(("vila",), tolerance=1.0), paper, tasks, {"vila": samples}, resamples=100)
    cells = {c.column: c for c in verdict.cells}
    assert cells["T-2"].passed is False
    assert cells["I-1"].ours is None and cells["I-1"].passed is None
    assert cells["overall_diag"].passed is None
    # N-1 and N-2: 1000 scored each; I-1: none of its 600 specified samples.
    assert cells["overall_diag"].coverage == pytest.approx(2000 / 2600)
    assert cells["I-1"].coverage == 0.0
    assert verdict.n_unreproduced == 2


def test_inconsistent_cells_are_flagged_with_their_note(paper: PaperSpec, tasks) -> None:
    flags = inconsistent_cells(paper)
    assert ("gpt-4v", "overall_diag") in flags
    assert {("llava-1.6-7b", c) for c in ("T-1", "T-2", "T-3", "T-4")} <= set(flags)
    verdict = build_verdict(run(("gpt-4v",)), paper, tasks, {"gpt-4v": samples_for(paper, tasks, "gpt-4v")},
                            resamples=100)  # fmt: skip
    diag = next(c for c in verdict.cells if c.column == "overall_diag")
    assert diag.flagged and "N-1 and N-2 only" in diag.flag_note
    # Following the paper's own rule gives the mean of N-1, N-2 and I-1, so the printed 99.4 is missed.
    assert diag.passed is False
    assert not next(c for c in verdict.cells if c.column == "T-1").flagged


def test_rank_correlation_is_spearman_over_models(paper: PaperSpec, tasks) -> None:
    models = ("gpt-4o", "vila", "cheetor", "random")
    samples = {m: samples_for(paper, tasks, m) for m in models}
    verdict = build_verdict(run(models), paper, tasks, samples, resamples=50)
    real = next(r for r in verdict.rank_correlations if r.column == "overall_real")
    assert real.rho == pytest.approx(1.0) and real.n_models == 4
    reversed_ = rank_correlation("x", {"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 3.0, "b": 2.0, "c": 1.0})
    assert reversed_.rho == pytest.approx(-1.0)
    assert rank_correlation("x", {"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}).rho is None
