"""Did the run reproduce the paper? One verdict cell per model x main-table column, plus rank agreement.

The verdict compares a run's multi-image scores (paper scorer) with the published main table, so a
reader sees at once which numbers came back, by how much they differ, and whether the difference is
one the data can tell apart from chance. It is plain data for the report to render.

Each cell is in one of three states (``Agreement``), or has no score of ours:

- ``reproduced``: ``abs(ours - published) <= tolerance`` (the run spec's tolerance, table points);
  ``reproduced (paper's rule)``: the same against the value the paper's own rule gives, where its
  print is listed as inconsistent with that rule;
- ``consistent``: outside the tolerance, but the published value lies inside our bootstrap interval
  (widened by the 0.05 the printed rounding allows): the data cannot tell the two apart;
- ``not reproduced``: our interval excludes the published value.

The headline stays the tolerance rule: the table is reproduced when every cell is (either kind of)
``reproduced``. Each column and the whole table are also summarised in the three states: ``not
reproduced`` when any of its cells is, else ``consistent`` when any is, else ``reproduced``. What a
reader is told of a column or the table (``Standing``, the report's headline) puts first that most of
its cells have no score: ``incomplete``, so a table of a few scored cells never reads as judged.

``Verdict`` fields:

- ``run``, ``mode``, ``scorer``: what was compared (the paper's table is multi-image, paper scorer).
- ``tolerance``: ``RunSpec.tolerance``, in table points (x100).
- ``confidence``, ``resamples``, ``seed``: the bootstrap behind every interval.
- ``cells``: one ``VerdictCell`` per model of the run that has a published row, per column of the
  main table (``T-1`` ... ``I-1``, ``overall_real``, ``overall_diag``), in table order.
- ``columns``: per column key, its ``AgreementSummary``; ``table``: the summary of every cell.
- ``rank_correlations``: per overall column, Spearman's rho (and its p-value) between our scores and
  the published ones over the models that have both; ``None`` fields where fewer than 3 models do.

``VerdictCell`` fields:

- ``model``, ``column`` (the key, e.g. ``"T-1"``, ``"overall_real"``), ``header`` (as printed, e.g.
  ``"Overall Real."``).
- ``published``: the printed value; ``ours``: our value (``None`` when not computable, e.g. a task
  without a score); ``difference``: ``ours - published``.
- ``ci_low``, ``ci_high``: bootstrap interval of ``ours`` (percentile, samples resampled within each
  task); ``published_in_interval``: whether the published value lies in it (widened by ``ROUNDING``).
- ``coverage``: scored / expected samples behind ``ours`` (1.0 for a complete cell).
- ``passed``: ``abs(difference) <= tolerance``, ``None`` when ``ours`` is ``None``.
- ``flagged``: the paper's own rules do not reproduce its printed value (``specs/paper.yaml``
  ``main_table.inconsistencies``); ``flag_note`` says why; ``rule_value``: the value the rule gives,
  where the inconsistency names one column.
- ``agreement``: the cell's state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

import numpy as np
from pydantic import Field
from scipy.stats import spearmanr

from milebench.score.aggregate import OVERALL_DIAG, OVERALL_REAL, column_tasks
from milebench.score.uncertainty import TaskSamples, bootstrap_table
from milebench.spec.base import Spec
from milebench.spec.paper import Inconsistency, MainRow, PaperSpec
from milebench.spec.run import Mode, RunSpec
from milebench.spec.task import Group, TaskSpec

COLUMNS: tuple[tuple[str, str], ...] = (
    *((g.value, g.value) for g in Group),
    (OVERALL_REAL, "Overall Real."),
    (OVERALL_DIAG, "Overall Diag."),
)
"""(key, header) of the main table's score columns, in the paper's order."""
ROUNDING = 0.05
"""Half the last printed digit: a printed value stands for anything within this of it."""
EPSILON = 1e-9
"""Float slack of the tolerance rule: a difference exactly at the tolerance is within it."""


class Agreement(StrEnum):
    """How a reproduced number stands to the published one (see the module docstring)."""

    REPRODUCED = "reproduced"
    RULE = "reproduced (paper's rule)"
    CONSISTENT = "consistent"
    NOT_REPRODUCED = "not reproduced"
    NO_SCORE = "no score"


def within(difference: float, tolerance: float) -> bool:
    return abs(difference) <= tolerance + EPSILON


def in_interval(published: float, low: float | None, high: float | None) -> bool | None:
    """Whether a printed value lies in our interval widened by ``ROUNDING``; None without an interval."""
    if low is None or high is None:
        return None
    return low - ROUNDING <= published <= high + ROUNDING


def agreement(
    ours: float | None, published: float, inside: bool | None, tolerance: float, rule: float | None = None
) -> Agreement:
    """The state of one cell; ``inside``: the published value lies in our (widened) interval."""
    if ours is None:
        return Agreement.NO_SCORE
    if within(ours - published, tolerance):
        return Agreement.REPRODUCED
    if rule is not None and within(ours - rule, tolerance):
        return Agreement.RULE
    return Agreement.CONSISTENT if inside else Agreement.NOT_REPRODUCED


class Standing(StrEnum):
    """What a column, the whole table or the headline says: one word, by one rule (``standing``)."""

    REPRODUCED = "reproduced"
    CONSISTENT = "consistent"
    NOT_REPRODUCED = "not reproduced"
    INCOMPLETE = "incomplete"


class AgreementSummary(Spec):
    """A column's (or the table's) cells by state, and the state that sums them up."""

    state: Agreement
    counts: dict[Agreement, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def scored(self) -> int:
        return self.total - self.counts.get(Agreement.NO_SCORE, 0)

    @property
    def standing(self) -> Standing:
        """``incomplete`` when most cells have no score; else ``not reproduced`` when any cell is; else
        ``incomplete`` when any has no score; else ``consistent`` when any is; else ``reproduced``
        (every cell within the tolerance: the headline's rule)."""
        if 2 * self.scored < self.total or not self.total:
            return Standing.INCOMPLETE
        if self.counts.get(Agreement.NOT_REPRODUCED, 0):
            return Standing.NOT_REPRODUCED
        if self.scored < self.total:
            return Standing.INCOMPLETE
        if self.counts.get(Agreement.CONSISTENT, 0):
            return Standing.CONSISTENT
        return Standing.REPRODUCED


def summarise_agreement(states: Iterable[Agreement]) -> AgreementSummary:
    """``not reproduced`` if any cell is, else ``consistent`` if any is, else ``reproduced``; cells
    without a score are counted but decide nothing (all without one: ``no score``)."""
    found = list(states)
    counts = {state: found.count(state) for state in Agreement}
    for state in (Agreement.NOT_REPRODUCED, Agreement.CONSISTENT):
        if counts[state]:
            return AgreementSummary(state=state, counts=counts)
    scored = counts[Agreement.REPRODUCED] + counts[Agreement.RULE]
    return AgreementSummary(state=Agreement.REPRODUCED if scored else Agreement.NO_SCORE, counts=counts)


class VerdictCell(Spec):
    """One reproduced number of the main table beside the published one."""

    model: str
    column: str
    header: str
    published: float
    ours: float | None
    difference: float | None = Field(description="ours - published, table points.")
    ci_low: float | None
    ci_high: float | None
    published_in_interval: bool | None
    coverage: float | None = Field(description="Scored / expected samples behind ours.")
    passed: bool | None
    flagged: bool
    flag_note: str | None = None
    rule_value: float | None = None
    agreement: Agreement


class RankCorrelation(Spec):
    """Spearman's rho between our and the published ranking of models on one column."""

    column: str
    n_models: int
    rho: float | None
    p_value: float | None
    models: tuple[str, ...]


class Verdict(Spec):
    """The reproduction verdict of a run against the paper's main table."""

    run: str
    mode: Mode
    scorer: str
    tolerance: float
    confidence: float
    resamples: int
    seed: int
    cells: tuple[VerdictCell, ...]
    columns: dict[str, AgreementSummary]
    table: AgreementSummary
    rank_correlations: tuple[RankCorrelation, ...]

    @property
    def all_reproduced(self) -> bool:
        """The headline: every cell within the tolerance of the print (or of the paper's own rule)."""
        return bool(self.cells) and all(
            c.agreement in (Agreement.REPRODUCED, Agreement.RULE) for c in self.cells
        )


def inconsistent_cells(paper: PaperSpec) -> dict[tuple[str, str], Inconsistency]:
    """(model, column) -> the paper's listed inconsistency; a ``T-1..T-4`` column spans its range."""
    keys = [key for key, _ in COLUMNS]
    cells: dict[tuple[str, str], Inconsistency] = {}
    for item in paper.main_table.inconsistencies:
        first, _, last = item.column.partition("..")
        span = keys[keys.index(first) : keys.index(last) + 1] if last else [item.column]
        for column in span:
            cells[(item.model, column)] = item
    return cells


def rule_values(paper: PaperSpec) -> dict[tuple[str, str], float]:
    """(model, column) -> the value the paper's rule computes, for inconsistencies naming one column."""
    return {(i.model, i.column): i.computed for i in paper.main_table.inconsistencies if ".." not in i.column}


def published_values(row: MainRow) -> dict[str, float]:
    return {**{g.value: v for g, v in row.groups.items()}, OVERALL_REAL: row.overall_real,
            OVERALL_DIAG: row.overall_diag}  # fmt: skip


def rank_correlation(
    column: str, ours: Mapping[str, float], published: Mapping[str, float]
) -> RankCorrelation:
    """Spearman's rho over the models with both values; undefined below 3 models or for constant input."""
    models = tuple(m for m in published if m in ours)
    rho = p_value = None
    if len(models) >= 3:
        a = np.array([ours[m] for m in models])
        b = np.array([published[m] for m in models])
        if np.ptp(a) > 0 and np.ptp(b) > 0:
            result = spearmanr(a, b)
            rho, p_value = float(result.statistic), float(result.pvalue)
    return RankCorrelation(column=column, n_models=len(models), rho=rho, p_value=p_value, models=models)


def column_coverage(
    column: str, tasks: Sequence[TaskSpec], samples: Mapping[str, TaskSamples]
) -> float | None:
    """Scored / expected samples of the tasks a column rests on; a task without judgments counts as
    its spec's ``n_samples`` expected and none scored."""
    members = column_tasks(column, tasks)
    expected = sum(samples[t.name].n_expected if t.name in samples else t.n_samples for t in members)
    scored = sum(samples[t.name].n_scored for t in members if t.name in samples)
    return scored / expected if expected else None


def build_verdict(
    run: RunSpec,
    paper: PaperSpec,
    tasks: Sequence[TaskSpec],
    samples: Mapping[str, Mapping[str, TaskSamples]],
    scorer: str = "paper",
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Verdict:
    """The verdict from per-sample multi-image scores: ``samples[model][task]`` for each run model."""
    flags = inconsistent_cells(paper)
    rules = rule_values(paper)
    rows = {row.model: row for row in paper.main_table.rows}
    cells: list[VerdictCell] = []
    overall: dict[str, dict[str, float]] = {OVERALL_REAL: {}, OVERALL_DIAG: {}}
    published_overall: dict[str, dict[str, float]] = {OVERALL_REAL: {}, OVERALL_DIAG: {}}
    for model in run.models:
        if model not in rows:
            continue
        table = bootstrap_table(samples.get(model, {}), tasks, resamples, seed, confidence)
        published = published_values(rows[model])
        for column, header in COLUMNS:
            estimate = table[column]
            ours = estimate.value
            difference = None if ours is None else ours - published[column]
            inside = in_interval(published[column], estimate.low, estimate.high)
            flag = flags.get((model, column))
            rule = rules.get((model, column))
            cells.append(
                VerdictCell(
                    model=model,
                    column=column,
                    header=header,
                    published=published[column],
                    ours=ours,
                    difference=difference,
                    ci_low=estimate.low,
                    ci_high=estimate.high,
                    published_in_interval=inside,
                    coverage=column_coverage(column, tasks, samples.get(model, {})),
                    passed=None if difference is None else within(difference, run.tolerance),
                    flagged=flag is not None,
                    flag_note=flag.note if flag is not None else None,
                    rule_value=rule,
                    agreement=agreement(ours, published[column], inside, run.tolerance, rule),
                )
            )
            if column in overall and ours is not None:
                overall[column][model] = ours
                published_overall[column][model] = published[column]
    return Verdict(
        run=run.name,
        mode=Mode.MULTI_IMAGE,
        scorer=scorer,
        tolerance=run.tolerance,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        cells=tuple(cells),
        columns={
            column: summarise_agreement(c.agreement for c in cells if c.column == column)
            for column, _ in COLUMNS
        },
        table=summarise_agreement(c.agreement for c in cells),
        rank_correlations=tuple(
            rank_correlation(column, overall[column], published_overall[column]) for column in overall
        ),
    )
