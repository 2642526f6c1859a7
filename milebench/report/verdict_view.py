"""The verdict against the paper as the report shows it: one status per cell and one overall answer.

``milebench.score.verdict`` judges every cell against the printed value. Where the paper's own rule
does not give its printed value (``main_table.inconsistencies`` with an exact column), a reproduction
that is faithful to the rule must miss the print; such a cell is shown as failing against the print
and passing against the rule's value, with the paper's note as a footnote, and it counts as a pass
for the overall answer. Everything else must pass against the print.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from milebench.report.evidence import Evidence
from milebench.score.registry import DEFAULT_SCORER
from milebench.score.uncertainty import TaskSamples, task_samples
from milebench.score.verdict import Verdict, VerdictCell, build_verdict
from milebench.spec.model import ModelSpec
from milebench.spec.paper import PaperSpec
from milebench.spec.run import Mode, RunSpec
from milebench.spec.task import TaskSpec

PASS, FAIL, RULE_PASS, UNREPRODUCED = "pass", "fail", "pass (paper's rule)", "not reproduced"


@dataclass(frozen=True)
class VerdictRow:
    cell: VerdictCell
    display_name: str
    status: str
    rule_value: float | None
    """The value the paper's own rule gives for a flagged cell (from its printed groups), if exact."""
    footnote: int | None
    """Number of the inconsistency footnote of a flagged cell."""


@dataclass(frozen=True)
class VerdictView:
    verdict: Verdict
    rows: list[VerdictRow]
    footnotes: list[str]

    @property
    def all_pass(self) -> bool:
        return bool(self.rows) and all(r.status in (PASS, RULE_PASS) for r in self.rows)

    def count(self, status: str) -> int:
        return sum(1 for r in self.rows if r.status == status)


def rule_values(paper: PaperSpec) -> dict[tuple[str, str], float]:
    """(model, column) -> the value the paper's rule computes, for inconsistencies naming one column."""
    return {(i.model, i.column): i.computed for i in paper.main_table.inconsistencies if ".." not in i.column}


def status(cell: VerdictCell, rule: float | None, tolerance: float) -> str:
    if cell.ours is None or cell.passed is None:
        return UNREPRODUCED
    if cell.passed:
        return PASS
    if cell.flagged and rule is not None and abs(cell.ours - rule) <= tolerance + 1e-9:
        return RULE_PASS
    return FAIL


def verdict_view(verdict: Verdict, paper: PaperSpec, models: Mapping[str, ModelSpec]) -> VerdictView:
    rules = rule_values(paper)
    notes: list[str] = []
    rows = []
    for cell in verdict.cells:
        footnote = None
        if cell.flagged and cell.flag_note:
            if cell.flag_note not in notes:
                notes.append(cell.flag_note)
            footnote = notes.index(cell.flag_note) + 1
        rule = rules.get((cell.model, cell.column))
        rows.append(
            VerdictRow(
                cell=cell,
                display_name=models[cell.model].display_name,
                status=status(cell, rule, verdict.tolerance),
                rule_value=rule,
                footnote=footnote,
            )
        )
    return VerdictView(verdict, rows, notes)


def run_samples(
    run: RunSpec, tasks: Sequence[TaskSpec], evidence: Evidence
) -> dict[str, dict[str, TaskSamples]]:
    """Per model and task, the multi-image samples the paper scorer judged (absent judgments: left out)."""
    samples: dict[str, dict[str, TaskSamples]] = {}
    for model in run.models:
        for task in tasks:
            judgments = evidence.judgments(model, task.name, Mode.MULTI_IMAGE)
            if judgments is not None:
                samples.setdefault(model, {})[task.name] = task_samples(judgments, DEFAULT_SCORER)
    return samples


def build_verdict_view(
    run: RunSpec,
    paper: PaperSpec,
    models: Sequence[ModelSpec],
    run_tasks: Sequence[TaskSpec],
    all_tasks: Sequence[TaskSpec],
    evidence: Evidence,
) -> VerdictView | None:
    """The verdict of a run that has multi-image scores and at least one model of the paper's table.

    Groups are formed over all tasks, as in the main table: a group with a task outside the run has no
    value of ours, so it is "not reproduced" rather than judged on part of its tasks.
    """
    published = {row.model for row in paper.main_table.rows}
    if Mode.MULTI_IMAGE not in run.modes or not published & set(run.models):
        return None
    samples = run_samples(run, run_tasks, evidence)
    verdict = build_verdict(run, paper, all_tasks, samples, scorer=DEFAULT_SCORER)
    return verdict_view(verdict, paper, {m.name: m for m in models})
