"""MileBench's verdict against its paper's main table as the report shows it: a row per cell, a summary
per column and for the whole table, and the headline. Where the paper's own rule does not give its printed
value (``main_table.inconsistencies`` with an exact column), the cell's note is a footnote; the states and
summaries are ``milebench.report.verdict_view``'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from milebench.benchmarks.milebench.paper import PaperSpec
from milebench.benchmarks.milebench.score.verdict import COLUMNS, Verdict
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.report.verdict_view import SummaryRow, VerdictRow, summary_row
from milebench.spec.model import ModelSpec
from milebench.verdict import Standing


@dataclass(frozen=True)
class VerdictView:
    verdict: Verdict
    rows: list[VerdictRow]
    footnotes: list[str]
    summary: list[SummaryRow]
    """Each main-table column, then the whole table."""

    @property
    def table(self) -> SummaryRow:
        return self.summary[-1]

    @property
    def all_pass(self) -> bool:
        """The headline, by the tolerance rule: every cell reproduced."""
        return self.table.state is Standing.REPRODUCED

    def headline(self, tolerance: str) -> str:
        """The verdict in one phrase: the whole table's standing and what it rests on; ``tolerance`` as
        the report prints it."""
        t, within = self.table, f"within \u00b1{tolerance} points"
        if t.state is Standing.INCOMPLETE:
            scored = f" (the scored ones: {t.scored_state})" if t.scored else ""
            return f"incomplete: {t.scored} of {t.total} cells scored{scored}"
        if t.state is Standing.CONSISTENT:
            return f"consistent: not every cell {within}, none that the data can tell from the paper"
        return f"{t.state} {within}"

    @property
    def ranked(self) -> bool:
        """Whether any rank correlation is defined: a ranking of dashes alone is left out."""
        return any(rc.rho is not None for rc in self.verdict.rank_correlations)

    def count(self, status: str) -> int:
        return sum(1 for r in self.rows if r.status == status)


def verdict_view(verdict: Verdict, models: Mapping[str, ModelSpec]) -> VerdictView:
    notes: list[str] = []
    rows = []
    for cell in verdict.cells:
        footnote = None
        if cell.flagged and cell.flag_note:
            if cell.flag_note not in notes:
                notes.append(cell.flag_note)
            footnote = notes.index(cell.flag_note) + 1
        rows.append(VerdictRow(cell=cell, display_name=models[cell.model].display_name, footnote=footnote))
    summary = [summary_row(key, header, verdict.columns[key]) for key, header in COLUMNS]
    summary.append(summary_row("table", "All columns", verdict.table))
    return VerdictView(verdict, rows, notes, summary)


def build_verdict_view(
    run: RunSpec, paper: PaperSpec, models: Sequence[ModelSpec], verdict: Verdict | None
) -> VerdictView | None:
    """The verdict (``milebench aggregate``'s) of a run that has multi-image scores and at least one
    model of the paper's table.

    Groups are formed over all tasks, as in the main table: a group with a task outside the run has no
    value of ours, so it is "not reproduced" rather than judged on part of its tasks.
    """
    published = {row.model for row in paper.main_table.rows}
    if verdict is None or not published & set(run.models):
        return None
    return verdict_view(verdict, {m.name: m for m in models})
