"""Scorer sensitivity: how much of a score is the paper's answer extraction rather than the model.

Every task score file holds the paper scorer's score and, under ``variants``, the same samples judged
by every other registered scorer (milebench.score.registry); ``milebench aggregate`` aggregates each by
the paper's rules. The report shows, per variant scorer, the overall columns side by side, with the task
where the two scorers differ most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from milebench.benchmarks.milebench.paper import PAPER_MODE
from milebench.benchmarks.milebench.score.aggregate import OVERALL_DIAG, OVERALL_REAL
from milebench.benchmarks.milebench.score.run_aggregate import RunAggregate
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.spec.model import ModelSpec


@dataclass(frozen=True)
class SensitivityRow:
    model: str
    display_name: str
    paper: tuple[float | None, float | None]
    """(Overall Real., Overall Diag.) under the paper scorer."""
    variant: tuple[float | None, float | None]
    """The same under the variant scorer."""
    largest: tuple[str, float] | None
    """(task display name, variant minus paper) of the task where the scorers differ most."""

    @property
    def differences(self) -> tuple[float | None, float | None]:
        """Variant minus paper, per overall column."""
        real, diag = (
            None if p is None or q is None else q - p for p, q in zip(self.paper, self.variant, strict=True)
        )
        return real, diag


@dataclass(frozen=True)
class SensitivityTable:
    scorer: str
    """The variant scorer, as registered."""
    rows: list[SensitivityRow]


def sensitivity_rows(
    models: Sequence[ModelSpec], run_tasks: Sequence[TaskSpec], aggregate: RunAggregate, scorer: str
) -> list[SensitivityRow] | None:
    """Multi-image rows of every model under ``scorer``; None when no sample was judged by it."""
    names = {t.name: t.display_name for t in run_tasks}
    rows, judged = [], False
    for m in models:
        found = aggregate.model(m.name, PAPER_MODE).variants.get(scorer)
        columns = (found.columns if found is not None else None) or {}
        judged |= found is not None and found.columns is not None
        difference = found.difference if found is not None else {}
        gaps = [(names[task], gap) for task, gap in difference.items() if gap is not None]
        paper = aggregate.model(m.name, PAPER_MODE).columns
        rows.append(
            SensitivityRow(
                model=m.name,
                display_name=m.display_name,
                paper=(paper[OVERALL_REAL].value, paper[OVERALL_DIAG].value),
                variant=(columns.get(OVERALL_REAL), columns.get(OVERALL_DIAG)),
                largest=max(gaps, key=lambda g: abs(g[1])) if gaps else None,
            )
        )
    return rows if judged else None


def sensitivity_tables(
    models: Sequence[ModelSpec], run_tasks: Sequence[TaskSpec], aggregate: RunAggregate
) -> list[SensitivityTable] | None:
    """One table per variant scorer the aggregate holds samples of, by name; None when there is none."""
    scorers = sorted({name for m in aggregate.models for name in m.variants})
    tables = [
        SensitivityTable(scorer, rows)
        for scorer in scorers
        if (rows := sensitivity_rows(models, run_tasks, aggregate, scorer)) is not None
    ]
    return tables or None
