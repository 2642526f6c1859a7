"""Scorer sensitivity: how much of a score is the paper's answer extraction rather than the model.

Every task score file holds the paper scorer's score and, under ``variants``, the same samples judged
by the standard scorer. The report aggregates both by the paper's rules and shows the overall columns
side by side, with the task where the two scorers differ most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from milebench.report.tables import PAPER_MODE, ScoreLookup
from milebench.score.aggregate import group_scores, overall_diag, overall_real
from milebench.score.standard import SCORER_NAME as STANDARD
from milebench.spec.model import ModelSpec
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


def _overalls(
    scores: dict[str, float | None], all_tasks: Sequence[TaskSpec]
) -> tuple[float | None, float | None]:
    groups = group_scores(scores, all_tasks)
    return overall_real(groups), overall_diag(groups)


def sensitivity_rows(
    models: Sequence[ModelSpec],
    run_tasks: Sequence[TaskSpec],
    all_tasks: Sequence[TaskSpec],
    lookup: ScoreLookup,
) -> list[SensitivityRow] | None:
    """Multi-image rows of every model; None when no score file carries the standard scorer."""
    rows, any_standard = [], False
    for m in models:
        paper: dict[str, float | None] = {}
        standard: dict[str, float | None] = {}
        gaps: list[tuple[str, float]] = []
        for task in run_tasks:
            found = lookup(m.name, task.name, PAPER_MODE)
            variant = found.variants.get(STANDARD) if found is not None else None
            paper[task.name] = found.score if found is not None else None
            standard[task.name] = variant.score if variant is not None else None
            any_standard |= variant is not None
            gap = found.difference(STANDARD) if found is not None else None
            if gap is not None:
                gaps.append((task.display_name, gap))
        rows.append(
            SensitivityRow(
                model=m.name,
                display_name=m.display_name,
                paper=_overalls(paper, all_tasks),
                standard=_overalls(standard, all_tasks),
                largest=max(gaps, key=lambda g: abs(g[1])) if gaps else None,
            )
        )
    return rows if any_standard else None
