"""Did the run reproduce the paper? One verdict cell per model x main-table column, plus rank agreement.

The verdict compares a run's multi-image scores (paper scorer) with the published main table, so a
reader sees at once which numbers came back, by how much they differ, and whether the difference is
one the data can tell apart from chance. It is plain data for the report to render.

Each cell is judged by the kit's one rule (``milebench.verdict``): reproduced, reproduced by the
paper's own rule, consistent, not reproduced, or no score of ours.

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

``VerdictCell`` (``milebench.verdict``) here: ``column`` is a main-table key (``"T-1"``,
``"overall_real"``), ``header`` as printed (``"Overall Real."``); ``ci_low``, ``ci_high`` a percentile
interval, samples resampled within each task; ``coverage`` scored / expected samples behind ``ours``;
``flagged`` where the paper's own rules do not reproduce its print (``specs/paper.yaml``
``main_table.inconsistencies``), ``rule_value`` where the inconsistency names one column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from milebench.benchmarks.milebench.paper import Inconsistency, MainRow, PaperSpec
from milebench.benchmarks.milebench.score.aggregate import OVERALL_DIAG, OVERALL_REAL, column_tasks
from milebench.benchmarks.milebench.score.uncertainty import TaskSamples, bootstrap_table
from milebench.benchmarks.milebench.spec.run import Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import Group, TaskSpec
from milebench.spec.base import Spec
from milebench.verdict import Agreement, AgreementSummary, VerdictCell, judged, summarise_agreement

COLUMNS: tuple[tuple[str, str], ...] = (
    *((g.value, g.value) for g in Group),
    (OVERALL_REAL, "Overall Real."),
    (OVERALL_DIAG, "Overall Diag."),
)
"""(key, header) of the main table's score columns, in the paper's order."""


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
    """Spearman's rho over the models with both values; undefined below 3 models or for constant input.
    SciPy's stats load here, not with the module: every score job imports it and none ranks (1.3 s each)."""
    from scipy.stats import spearmanr

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
            flag = flags.get((model, column))
            cells.append(
                judged(
                    model,
                    column,
                    header,
                    published[column],
                    ours,
                    run.tolerance,
                    (estimate.low, estimate.high),
                    column_coverage(column, tasks, samples.get(model, {})),
                    flag.note if flag is not None else None,
                    rules.get((model, column)),
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
