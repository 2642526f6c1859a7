"""The drift audit's tables, in the table form of the core's audit (``milebench.audit.render``): per-task
score differences with their intervals, flips and changed texts, then the paper table's group and overall
columns."""

from __future__ import annotations

from milebench.audit.render import AuditTable, markdown, number, rate_cell
from milebench.benchmarks.milebench.audit.drift import DriftAudit
from milebench.benchmarks.milebench.score.uncertainty import Comparison


def comparison_cells(found: Comparison | None) -> tuple[str, str, str]:
    if found is None or found.difference is None:
        return ("-", "-", "-")
    return (
        number(found.difference),
        f"[{number(found.low)}, {number(found.high)}]",
        number(found.p_value, 4),
    )


def drift_tables(audit: DriftAudit) -> list[AuditTable]:
    """Per-task deltas, flips and changed texts; then the group and overall columns."""
    tables = [
        AuditTable(
            title=f"Environment drift: {audit.b} against {audit.a}",
            caption=f"Score difference A minus B in table points on the samples judged on both sides "
            f"({audit.scorer} scorer; paired bootstrap 95% interval, {audit.resamples} resamples, seed "
            f"{audit.seed}; permutation p-value). Flips: samples whose score differs; texts: changed "
            "answers; input tokens: samples whose input token count differs (the two sides fed the model "
            "other tokens); 95% Wilson intervals.",
            header=("task", "A - B", "interval", "p", "flips", "changed texts", "changed input tokens"),
            rows=tuple(
                (
                    row.task,
                    *comparison_cells(row.comparison),
                    rate_cell(row.flips),
                    rate_cell(row.texts),
                    rate_cell(row.inputs),
                )
                for row in audit.tasks
            ),
        )
    ]
    if audit.columns:
        tables.append(
            AuditTable(
                title=f"Group and overall columns: {audit.b} against {audit.a}",
                caption="",
                header=("column", "A - B", "interval", "p", "pairs"),
                rows=tuple((c.column, *comparison_cells(c), str(c.n_pairs)) for c in audit.columns),
            )
        )
    return tables


def drift_markdown(audit: DriftAudit) -> str:
    return markdown(drift_tables(audit))
