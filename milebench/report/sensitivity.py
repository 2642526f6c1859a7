"""Scorer sensitivity: how much of a score is the paper's answer extraction rather than the model.

Every task score file holds the paper scorer's score and, under ``variants``, the same samples judged
by the standard scorer; ``milebench aggregate`` aggregates both by the paper's rules. The report shows
the overall columns side by side, with the task where the two scorers differ most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from milebench.score.aggregate import OVERALL_DIAG, OVERALL_REAL
from milebench.score.run_aggregate import RunAggregate
from milebench.spec.model import ModelSpec
from milebench.spec.paper import PAPER_MODE
from milebench.spec.task import TaskSpec


@dataclass(frozen=True)
class SensitivityRow:
    model: str
    display_name: str
    paper: tuple[float | None, float | None]
    """(Overall Real., Overall Diag.) under the paper scorer."""
    standard: tuple[float | None, float | None]
    largest: tuple[str, float] | None
    """(task display name, standard minus paper) of the task where the scorers differ most."""

    @property
    def differences(self) -> tuple[float | None, float | None]:
        """Standard minus paper, per overall column."""
        real, diag = (
            None if p is None or q is None else q - p for p, q in zip(self.paper, self.standard, strict=True)
        )
        return real, diag


def sensitivity_rows(
    models: Sequence[ModelSpec], run_tasks: Sequence[TaskSpec], aggregate: RunAggregate
) -> list[SensitivityRow] | None:
    """Multi-image rows of every model; None when no sample was judged by the standard scorer."""
    names = {t.name: t.display_name for t in run_tasks}
    rows, any_standard = [], False
    for m in models:
        found = aggregate.model(m.name, PAPER_MODE)
        standard = found.standard or {}
        any_standard |= found.standard is not None
        gaps = [(names[task], gap) for task, gap in found.scorer_difference.items() if gap is not None]
        rows.append(
            SensitivityRow(
                model=m.name,
                display_name=m.display_name,
                paper=(found.columns[OVERALL_REAL].value, found.columns[OVERALL_DIAG].value),
                standard=(standard.get(OVERALL_REAL), standard.get(OVERALL_DIAG)),
                largest=max(gaps, key=lambda g: abs(g[1])) if gaps else None,
            )
        )
    return rows if any_standard else None
