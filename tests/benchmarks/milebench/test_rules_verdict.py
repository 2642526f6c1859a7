"""Verdict rules stated as facts: a zero tolerance, the 0.05 the printed rounding allows, the asked
confidence, coverage, and rank correlation (the tolerance boundary itself is in ``test_verdict``)."""

from __future__ import annotations

import numpy as np
import pytest

from milebench.benchmarks.milebench.paper import load_paper
from milebench.benchmarks.milebench.score.uncertainty import TaskSamples
from milebench.benchmarks.milebench.score.verdict import build_verdict, inconsistent_cells, rank_correlation
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, RunSpec
from milebench.benchmarks.milebench.spec.task import Group
from milebench.verdict import Agreement, VerdictCell

SPECS = load_specs()
TASKS = list(SPECS.tasks.values())
PAPER = load_paper(SPECS)
ROW = next(r for r in PAPER.main_table.rows if r.model == "vila")
GROUPS = [g.value for g in Group]


def constant(value: float, n: int = 10) -> TaskSamples:
    """n samples all scoring ``value`` (table points / 100): the interval is the single point."""
    return TaskSamples(ids=tuple(range(n)), scores=np.full(n, value / 100), n_expected=n, n_scored=n)


def group_cells(offset: float, tolerance: float = 1.0) -> list[VerdictCell]:
    """Every task scores its group's printed value + ``offset`` points; the twelve group cells."""
    samples = {t.name: constant(ROW.groups[t.group] + offset) for t in TASKS}
    run = RunSpec(name="v", description="d", models=("vila",), data=FixtureSource(kind="fixture"),
                  tolerance=tolerance)  # fmt: skip
    verdict = build_verdict(run, PAPER, TASKS, {"vila": samples}, resamples=20)
    cells = [c for c in verdict.cells if c.column in GROUPS]
    assert len(cells) == 12
    return cells


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


def test_a_model_with_a_published_row_and_no_scores_has_no_score_in_any_cell() -> None:
    """Models without a published row are skipped, whatever their place in the run."""
    run = RunSpec(name="v", description="d", models=("oracle", "vila"), data=FixtureSource(kind="fixture"))
    verdict = build_verdict(run, PAPER, TASKS, {}, resamples=20)
    assert {c.model for c in verdict.cells} == {"vila"}
    assert [(c.ours, c.passed, c.coverage) for c in verdict.cells] == [(None, None, 0.0)] * 14
    assert {c.agreement for c in verdict.cells} == {Agreement.NO_SCORE}
    assert verdict.table.state is Agreement.NO_SCORE and verdict.table.counts[Agreement.NO_SCORE] == 14
    assert not verdict.all_reproduced
    assert (verdict.scorer, verdict.resamples, verdict.seed, verdict.confidence) == ("paper", 20, 0, 0.95)


def test_defaults_are_the_paper_scorer_and_2000_seeded_resamples() -> None:
    run = RunSpec(name="v", description="d", models=("vila",), data=FixtureSource(kind="fixture"))
    verdict = build_verdict(run, PAPER, TASKS, {})
    assert (verdict.scorer, verdict.resamples, verdict.seed, verdict.confidence) == ("paper", 2000, 0, 0.95)


def test_the_verdict_interval_has_the_asked_confidence() -> None:
    """40 samples, 20 right, in every task: each task's interval is the binomial one (see test_rules_score);
    a group of identical tasks repeats it."""
    scores = np.array([1.0] * 20 + [0.0] * 20)
    half = TaskSamples(ids=tuple(range(40)), scores=scores, n_expected=40, n_scored=40)
    run = RunSpec(name="v", description="d", models=("vila",), data=FixtureSource(kind="fixture"))
    samples = {"vila": {t.name: half for t in TASKS}}
    for confidence, interval in ((0.95, (35.0, 65.0)), (0.90, (37.5, 62.5))):
        verdict = build_verdict(run, PAPER, TASKS, samples, resamples=20_000, confidence=confidence)
        s5 = next(c for c in verdict.cells if c.column == "S-5")  # one task
        assert (s5.ci_low, s5.ci_high) == interval
        assert verdict.confidence == confidence


def test_a_column_without_tasks_has_no_coverage() -> None:
    """With only the T-1 tasks listed, every other column rests on nothing: coverage is undefined."""
    t1 = [t for t in TASKS if t.group is Group.T1]
    run = RunSpec(name="v", description="d", models=("vila",), data=FixtureSource(kind="fixture"))
    verdict = build_verdict(run, PAPER, t1, {"vila": {t.name: constant(40.3) for t in t1}}, resamples=20)
    coverage = {c.column: c.coverage for c in verdict.cells}
    assert coverage["T-1"] == 1.0
    assert coverage["T-2"] is None and coverage["overall_diag"] is None
    assert coverage["overall_real"] == 1.0  # the listed realistic tasks are all scored


def test_a_value_the_paper_s_own_rule_gives_is_reproduced_by_that_rule() -> None:
    """GPT-4V's printed Overall Diag. (99.4) is not the mean of N-1, N-2 and I-1 (95.17, listed as the
    rule's value). With every group at its printed value, ours is 95.17: outside the tolerance of the
    print, within it of the rule's value, so the cell is reproduced by the paper's rule."""
    row = next(r for r in PAPER.main_table.rows if r.model == "gpt-4v")
    samples = {t.name: constant(row.groups[t.group]) for t in TASKS}
    run = RunSpec(name="v", description="d", models=("gpt-4v",), data=FixtureSource(kind="fixture"))
    verdict = build_verdict(run, PAPER, TASKS, {"gpt-4v": samples}, resamples=20)
    cells = {c.column: c for c in verdict.cells}
    diag = cells["overall_diag"]
    assert diag.ours == pytest.approx(95.17, abs=0.005)
    assert (diag.published, diag.rule_value, diag.passed) == (99.4, 95.17, False)
    assert diag.agreement is Agreement.RULE
    assert [c.column for c in verdict.cells if c.rule_value is not None] == ["overall_diag"]
    assert verdict.table.counts[Agreement.RULE] == 1
    assert verdict.columns["overall_diag"].state is Agreement.REPRODUCED


def test_a_column_range_flags_exactly_its_columns() -> None:
    flags = inconsistent_cells(PAPER)
    llava = sorted(column for model, column in flags if model == "llava-1.6-7b")
    assert llava == ["T-1", "T-2", "T-3", "T-4"]


def test_rank_correlation_is_spearman_with_its_p_value() -> None:
    """Ranks 1 3 2 4 5 against 1 2 3 4 5: rho = 1 - 6 * 2 / (5 * 24) = 0.9, two-sided p of the t test
    with 3 degrees of freedom 0.0374."""
    ours = {m: v for m, v in zip("abcde", (1.0, 3.0, 2.0, 4.0, 5.0), strict=True)}
    published = {m: v for m, v in zip("abcde", (10.0, 20.0, 30.0, 40.0, 50.0), strict=True)}
    found = rank_correlation("overall_real", ours, published)
    assert (found.n_models, found.models) == (5, tuple("abcde"))
    assert found.rho == pytest.approx(0.9)
    assert found.p_value == pytest.approx(0.0374, abs=1e-4)


@pytest.mark.parametrize("constant_side", ["ours", "published"])
def test_rank_correlation_is_undefined_when_one_side_is_constant(constant_side: str) -> None:
    varied = {"a": 1.0, "b": 2.0, "c": 3.0}
    flat = {"a": 5.0, "b": 5.0, "c": 5.0}
    ours, published = (flat, varied) if constant_side == "ours" else (varied, flat)
    found = rank_correlation("overall_real", ours, published)
    assert (found.n_models, found.rho, found.p_value) == (3, None, None)


def test_rank_correlation_needs_three_models_with_both_values() -> None:
    found = rank_correlation("x", {"a": 1.0, "b": 2.0, "z": 9.0}, {"a": 1.0, "b": 2.0, "c": 3.0})
    assert (found.n_models, found.models, found.rho) == (2, ("a", "b"), None)


def test_rank_correlation_of_values_within_one_point() -> None:
    """A spread below one table point still ranks the models."""
    found = rank_correlation(
        "overall_real", {"a": 10.0, "b": 10.2, "c": 10.5}, {"a": 1.0, "b": 1.3, "c": 1.9}
    )
    assert found.rho == pytest.approx(1.0)
