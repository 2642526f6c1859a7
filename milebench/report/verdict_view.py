"""A verdict against a paper as a report shows it: each cell's state and its CSS class, and the summary
of a column (or a whole table) in the report's states.

``milebench.verdict`` decides every cell's state. A cell "reproduced (paper's rule)" (within the tolerance
of the value the paper's own rule gives, where that differs from its print) counts as reproduced, and
each summary says one ``Standing`` by one rule, so a headline and its table's row never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def summary_row(key: str, header: str, summary: AgreementSummary) -> SummaryRow:
    """The report's three states (and no score), the paper's-rule cells counted as reproduced."""
    counts = {state: summary.counts.get(state, 0) for state in SUMMARY_STATES}
    rule = summary.counts.get(Agreement.RULE, 0)
    counts[Agreement.REPRODUCED] += rule
    return SummaryRow(
        key, header, summary.standing, summary.state, counts, rule, summary.scored, summary.total
    )
