"""The audit's tables as Markdown: printed by ``milebench audit`` and written beside its JSON."""

from __future__ import annotations

from collections.abc import Sequence

from milebench.audit.batch import BatchAudit
from milebench.audit.drift import DriftAudit
from milebench.audit.stats import Rate
from milebench.score.uncertainty import Comparison


def rate_cell(rate: Rate) -> str:
    """``k/n = r% [low, high]``, or ``-`` with no samples."""
    if rate.rate is None or rate.low is None or rate.high is None:
        return "-"
    return (
        f"{rate.changed}/{rate.total} = {100 * rate.rate:.1f}% [{100 * rate.low:.1f}, {100 * rate.high:.1f}]"
    )


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def batch_markdown(audit: BatchAudit) -> str:
    """Rates per task and batch size, then the changed samples with where they parted."""
    lines = [
        f"## Batch invariance: {audit.model} ({audit.execution})",
        "",
        f"Reference: batch size 1 in prepared order. Each batch size: {audit.repeats} repeat(s), samples "
        f"shuffled per repeat (seed {audit.seed}). Changed: in any repeat, against the reference; 95% Wilson "
        f"intervals. Scores: the {audit.scorer} scorer. Near-tie: reference top-1/top-2 margin below "
        f"{audit.tie_margin} nats where the ids part.",
        "",
        *table(
            ["task", "batch", "changed texts", "changed scores", "divergences", "near-ties"],
            [
                [
                    row.task,
                    str(row.batch_size),
                    rate_cell(row.texts),
                    rate_cell(row.scores),
                    str(row.divergences),
                    str(row.near_ties),
                ]
                for row in audit.summary
            ],
        ),
    ]
    changed = [c for c in audit.samples if c.text_changes or c.first_divergence is not None]
    if changed:
        lines += [
            "",
            "### Changed samples",
            "",
            *table(
                [
                    "task",
                    "sample",
                    "batch",
                    "texts",
                    "scores",
                    "first step",
                    "margin ref",
                    "margin",
                    "near-tie",
                ],
                [
                    [
                        c.task,
                        str(c.sample_id),
                        str(c.batch_size),
                        f"{c.text_changes}/{c.repeats}",
                        f"{c.score_changes}/{c.repeats}",
                        "-" if c.first_divergence is None else str(c.first_divergence),
                        number(c.reference_margin, 4),
                        number(c.margin, 4),
                        "-" if c.near_tie is None else ("yes" if c.near_tie else "no"),
                    ]
                    for c in changed
                ],
            ),
        ]
    return "\n".join(lines) + "\n"


def comparison_cells(found: Comparison | None) -> list[str]:
    if found is None or found.difference is None:
        return ["-", "-", "-"]
    return [
        number(found.difference),
        f"[{number(found.low)}, {number(found.high)}]",
        number(found.p_value, 4),
    ]


def drift_markdown(audit: DriftAudit) -> str:
    """Per-task deltas, flips and changed texts; then the group and overall columns."""
    lines = [
        f"## Environment drift: {audit.b} against {audit.a}",
        "",
        f"Score difference A minus B in table points on the samples judged on both sides ({audit.scorer} "
        f"scorer; paired bootstrap 95% interval, {audit.resamples} resamples, seed {audit.seed}; "
        "permutation p-value). Flips: samples whose score differs; texts: changed answers; 95% Wilson "
        "intervals.",
        "",
        *table(
            ["task", "A - B", "interval", "p", "flips", "changed texts"],
            [
                [row.task, *comparison_cells(row.comparison), rate_cell(row.flips), rate_cell(row.texts)]
                for row in audit.tasks
            ],
        ),
    ]
    if audit.columns:
        lines += [
            "",
            *table(
                ["column", "A - B", "interval", "p", "pairs"],
                [[c.column, *comparison_cells(c), str(c.n_pairs)] for c in audit.columns],
            ),
        ]
    return "\n".join(lines) + "\n"
