"""The audit's tables as Markdown (printed by an audit command and written beside its JSON) and as a
report lays them out: the batch invariance tables, and the table form every audit's tables take."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from milebench.audit.batch import BatchAudit
from milebench.audit.stats import Rate


def rate_cell(rate: Rate) -> str:
    """``k/n = r% [low, high]``, or ``-`` with no samples."""
    if rate.rate is None or rate.low is None or rate.high is None:
        return "-"
    return (
        f"{rate.changed}/{rate.total} = {100 * rate.rate:.1f}% [{100 * rate.low:.1f}, {100 * rate.high:.1f}]"
    )


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


@dataclass(frozen=True)
class AuditTable:
    """One audit table as printed (Markdown) and as the report lays it out (HTML, LaTeX)."""

    title: str
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def markdown(tables: Sequence[AuditTable]) -> str:
    """The first table under a second-level heading, the others under third-level ones."""
    lines: list[str] = []
    for i, found in enumerate(tables):
        lines += ([""] if i else []) + ["#" * (3 if i else 2) + f" {found.title}", ""]
        if found.caption:
            lines += [found.caption, ""]
        lines += ["| " + " | ".join(found.header) + " |", "|" + "|".join("---" for _ in found.header) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in found.rows]
    return "\n".join(lines) + "\n"


def batch_tables(audit: BatchAudit) -> list[AuditTable]:
    """Rates per task and batch size, then the changed samples with where they parted."""
    tables = [
        AuditTable(
            title=f"Batch invariance: {audit.model} ({audit.execution})",
            caption=f"Reference: batch size 1 in prepared order. Each batch size: {audit.repeats} "
            f"repeat(s), samples shuffled per repeat (seed {audit.seed}). Changed: in any repeat, against "
            f"the reference; 95% Wilson intervals. Scores: the {audit.scorer} scorer. Near-tie: reference "
            f"top-1/top-2 margin below {audit.tie_margin} nats where the ids part.",
            header=("task", "batch", "changed texts", "changed scores", "divergences", "near-ties"),
            rows=tuple(
                (
                    row.task,
                    str(row.batch_size),
                    rate_cell(row.texts),
                    rate_cell(row.scores),
                    str(row.divergences),
                    str(row.near_ties),
                )
                for row in audit.summary
            ),
        )
    ]
    changed = [c for c in audit.samples if c.text_changes or c.first_divergence is not None]
    if changed:
        tables.append(
            AuditTable(
                title=f"Changed samples: {audit.model} ({audit.execution})",
                caption="",
                header=(
                    "task",
                    "sample",
                    "batch",
                    "texts",
                    "scores",
                    "first step",
                    "margin ref",
                    "margin",
                    "near-tie",
                ),
                rows=tuple(
                    (
                        c.task,
                        str(c.sample_id),
                        str(c.batch_size),
                        f"{c.text_changes}/{c.repeats}",
                        f"{c.score_changes}/{c.repeats}",
                        "-" if c.first_divergence is None else str(c.first_divergence),
                        number(c.reference_margin, 4),
                        number(c.margin, 4),
                        "-" if c.near_tie is None else ("yes" if c.near_tie else "no"),
                    )
                    for c in changed
                ),
            )
        )
    return tables


def batch_markdown(audit: BatchAudit) -> str:
    return markdown(batch_tables(audit))
