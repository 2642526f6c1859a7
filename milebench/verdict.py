"""A run's numbers against a paper's, cell by cell: the one rule of every benchmark's verdict.

Each benchmark lays out its own cells (MileBench's main table, MMLongEmbed's tables and claims) and
judges each with :func:`judged`, in one of these states (``Agreement``), or without a score of ours:

- ``reproduced``: ``abs(ours - published) <= tolerance`` (the run spec's tolerance, table points);
  ``reproduced (paper's rule)``: the same against the value the paper's own rule gives, where its
  print is listed as inconsistent with that rule;
- ``consistent``: outside the tolerance, but the published value lies inside our bootstrap interval
  (widened by the 0.05 the printed rounding allows): the data cannot tell the two apart;
- ``not reproduced``: our interval excludes the published value.

A group of cells (a column, a kind, the whole table) is summed up in the same states
(:func:`summarise_agreement`); what a reader is told of it is its ``Standing``.

``VerdictCell`` fields: ``model``, ``column`` (its key), ``header`` (as the paper prints it);
``published``, ``ours`` (``None`` when not computable), ``difference`` (``ours - published``);
``ci_low``, ``ci_high``, ours's bootstrap interval, and ``published_in_interval`` (widened by
``ROUNDING``); ``coverage`` (scored / expected, 1.0 for a complete cell); ``passed``
(``abs(difference) <= tolerance``, ``None`` without ours); ``flagged``, ``flag_note`` and
``rule_value``: the paper's own rule does not give its print, why, and the value it gives;
``agreement``, the cell's state.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import Field

from milebench.spec.base import Spec

ROUNDING = 0.05
"""Half the last printed digit: a printed value stands for anything within this of it."""
EPSILON = 1e-9
"""Float slack of the tolerance rule: a difference exactly at the tolerance is within it."""


class Agreement(StrEnum):
    """How a reproduced number stands to the published one (see the module docstring)."""

    REPRODUCED = "reproduced"
    RULE = "reproduced (paper's rule)"
    CONSISTENT = "consistent"
    NOT_REPRODUCED = "not reproduced"
    NO_SCORE = "no score"


def within(difference: float, tolerance: float) -> bool:
    return abs(difference) <= tolerance + EPSILON


def in_interval(published: float, low: float | None, high: float | None) -> bool | None:
    """Whether a printed value lies in our interval widened by ``ROUNDING``; None without an interval."""
    if low is None or high is None:
        return None
    return low - ROUNDING <= published <= high + ROUNDING


def agreement(
    ours: float | None, published: float, inside: bool | None, tolerance: float, rule: float | None = None
) -> Agreement:
    """The state of one cell; ``inside``: the published value lies in our (widened) interval."""
    if ours is None:
        return Agreement.NO_SCORE
    if within(ours - published, tolerance):
        return Agreement.REPRODUCED
    if rule is not None and within(ours - rule, tolerance):
        return Agreement.RULE
    return Agreement.CONSISTENT if inside else Agreement.NOT_REPRODUCED


class Standing(StrEnum):
    """What a column, the whole table or the headline says: one word, by one rule (``standing``)."""

    REPRODUCED = "reproduced"
    CONSISTENT = "consistent"
    NOT_REPRODUCED = "not reproduced"
    INCOMPLETE = "incomplete"


class AgreementSummary(Spec):
    """A column's (or the table's) cells by state, and the state that sums them up."""

    state: Agreement
    counts: dict[Agreement, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def scored(self) -> int:
        return self.total - self.counts.get(Agreement.NO_SCORE, 0)

    @property
    def standing(self) -> Standing:
        """``incomplete`` when most cells have no score; else ``not reproduced`` when any cell is; else
        ``incomplete`` when any has no score; else ``consistent`` when any is; else ``reproduced``
        (every cell within the tolerance: the headline's rule)."""
        if 2 * self.scored < self.total or not self.total:
            return Standing.INCOMPLETE
        if self.counts.get(Agreement.NOT_REPRODUCED, 0):
            return Standing.NOT_REPRODUCED
        if self.scored < self.total:
            return Standing.INCOMPLETE
        if self.counts.get(Agreement.CONSISTENT, 0):
            return Standing.CONSISTENT
        return Standing.REPRODUCED


def summarise_agreement(states: Iterable[Agreement]) -> AgreementSummary:
    """``not reproduced`` if any cell is, else ``consistent`` if any is, else ``reproduced``; cells
    without a score are counted but decide nothing (all without one: ``no score``)."""
    found = list(states)
    counts = {state: found.count(state) for state in Agreement}
    for state in (Agreement.NOT_REPRODUCED, Agreement.CONSISTENT):
        if counts[state]:
            return AgreementSummary(state=state, counts=counts)
    scored = counts[Agreement.REPRODUCED] + counts[Agreement.RULE]
    return AgreementSummary(state=Agreement.REPRODUCED if scored else Agreement.NO_SCORE, counts=counts)


class VerdictCell(Spec):
    """One published value beside ours."""

    model: str
    column: str
    header: str
    published: float
    ours: float | None
    difference: float | None = Field(description="ours - published, table points.")
    ci_low: float | None
    ci_high: float | None
    published_in_interval: bool | None
    coverage: float | None = Field(description="Scored / expected samples behind ours.")
    passed: bool | None
    flagged: bool
    flag_note: str | None = None
    rule_value: float | None = None
    agreement: Agreement


def judged(
    model: str,
    column: str,
    header: str,
    published: float,
    ours: float | None,
    tolerance: float,
    interval: tuple[float | None, float | None] = (None, None),
    coverage: float | None = None,
    flag_note: str | None = None,
    rule: float | None = None,
) -> VerdictCell:
    """One published value beside ours (``interval``: ours's bootstrap interval), in its state;
    ``flag_note``: why the paper's own rule does not give its print, ``rule``: the value it gives."""
    low, high = interval if ours is not None else (None, None)
    difference = None if ours is None else ours - published
    inside = in_interval(published, low, high)
    return VerdictCell(
        model=model,
        column=column,
        header=header,
        published=published,
        ours=ours,
        difference=difference,
        ci_low=low,
        ci_high=high,
        published_in_interval=inside,
        coverage=coverage,
        passed=None if difference is None else within(difference, tolerance),
        flagged=flag_note is not None,
        flag_note=flag_note,
        rule_value=rule,
        agreement=agreement(ours, published, inside, tolerance, rule),
    )
