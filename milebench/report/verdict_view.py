"""The verdict against the paper as the report shows it: one state per cell, per column and overall.

``milebench.verdict`` decides every cell's state (reproduced, consistent, not reproduced, or no
score). Where the paper's own rule does not give its printed value (``main_table.inconsistencies``
with an exact column), a reproduction faithful to the rule must miss the print; such a cell is
"reproduced (paper's rule)" when it is within the tolerance of the rule's value, with the paper's note
as a footnote, and it counts as reproduced for the headline.

Each column, the whole table and the headline say one ``Standing`` by one rule, so the headline and the
table's own row never disagree; a table whose cells mostly have no score leads with "incomplete".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from milebench.score.verdict import COLUMNS, Verdict
from milebench.spec.model import ModelSpec
from milebench.spec.paper import PaperSpec
from milebench.spec.run import RunSpec
from milebench.verdict import Agreement, AgreementSummary, Standing, VerdictCell

STATE_CLASSES: dict[Agreement, str] = {
    Agreement.REPRODUCED: "reproduced",
    Agreement.RULE: "rule",
    Agreement.CONSISTENT: "consistent",
    Agreement.NOT_REPRODUCED: "not-reproduced",
    Agreement.NO_SCORE: "no-score",
}
"""The CSS class of each state (a state's text has spaces and quotes)."""
STANDING_CLASSES: dict[Standing, str] = {
    Standing.REPRODUCED: "reproduced",
    Standing.CONSISTENT: "consistent",
    Standing.NOT_REPRODUCED: "not-reproduced",
    Standing.INCOMPLETE: "incomplete",
}
SUMMARY_STATES = (Agreement.REPRODUCED, Agreement.CONSISTENT, Agreement.NOT_REPRODUCED, Agreement.NO_SCORE)
"""The states the summaries count; the paper's-rule cells are counted with the reproduced."""


@dataclass(frozen=True)
class VerdictRow:
    cell: VerdictCell
    display_name: str
    footnote: int | None
    """Number of the inconsistency footnote of a flagged cell."""

    @property
    def status(self) -> str:
        return self.cell.agreement.value

    @property
    def css(self) -> str:
        return STATE_CLASSES[self.cell.agreement]


@dataclass(frozen=True)
class SummaryRow:
    """A column's (or the whole table's) standing and its cells per state."""

    key: str
    header: str
    state: Standing
    scored_state: Agreement
    """The state of its scored cells alone (the verdict's own summary)."""
    counts: dict[Agreement, int]
    """Cells per state of ``SUMMARY_STATES`` (the paper's-rule cells among the reproduced)."""
    rule: int
    """Of the reproduced cells, those within the tolerance of the paper's own rule only."""
    scored: int
    total: int

    @property
    def css(self) -> str:
        return STANDING_CLASSES[self.state]


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


def summary_row(key: str, header: str, summary: AgreementSummary) -> SummaryRow:
    """The report's three states (and no score), the paper's-rule cells counted as reproduced."""
    counts = {state: summary.counts.get(state, 0) for state in SUMMARY_STATES}
    rule = summary.counts.get(Agreement.RULE, 0)
    counts[Agreement.REPRODUCED] += rule
    return SummaryRow(
        key, header, summary.standing, summary.state, counts, rule, summary.scored, summary.total
    )


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
