"""The report's tables as plain data, built from task scores and specs; templates only lay them out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from milebench.plan import applies
from milebench.score.aggregate import (
    Coverage,
    TaskScore,
    coverage,
    group_scores,
    overall_diag,
    overall_real,
)
from milebench.spec.model import ModelSpec, Section
from milebench.spec.paper import MainRow, PaperSpec
from milebench.spec.run import Mode, RunSpec
from milebench.spec.task import Group, TaskSpec

OVERALL_REAL, OVERALL_DIAG = "overall_real", "overall_diag"
MAIN_COLUMNS: tuple[tuple[str, str], ...] = (
    *((g.value, g.value) for g in Group),
    (OVERALL_REAL, "Overall Real."),
    (OVERALL_DIAG, "Overall Diag."),
)
"""(key, header) of the score columns of the paper's main table, in its order."""

SECTION_TITLES: dict[Section, str] = {
    Section.BASELINE: "Baseline",
    Section.CLOSED: "Closed-source models",
    Section.OPEN_IMAGE: "Open-source image models",
    Section.OPEN_VIDEO: "Open-source video models",
    Section.KIT: "Kit models (not in the paper)",
}
PAPER_MODE = Mode.MULTI_IMAGE
"""The mode of the paper's main table; published values are shown beside this mode's scores only."""

ScoreLookup = Callable[[str, str, Mode], TaskScore | None]
"""(model, task, mode) -> the task score, or None where its file is absent."""


@dataclass(frozen=True)
class MainTableRow:
    model: str
    display_name: str
    size: str | None
    ours: dict[str, float | None]
    paper: dict[str, float] | None
    flagged: frozenset[str] = frozenset()
    """Columns whose published value the paper's own rules do not reproduce (see notes)."""
    complete: bool = True


@dataclass(frozen=True)
class MainTableSection:
    title: str
    rows: list[MainTableRow]


@dataclass(frozen=True)
class TaskRow:
    task: str
    display_name: str
    group: str
    metric: str
    cells: dict[str, TaskScore | None]
    """Model name -> its task score."""


@dataclass(frozen=True)
class CoverageRow:
    model: str
    display_name: str
    coverage: Coverage


@dataclass(frozen=True)
class ModeTables:
    mode: Mode
    sections: list[MainTableSection]
    tasks: list[TaskRow]
    coverage: list[CoverageRow]
    with_paper: bool

    @property
    def complete(self) -> bool:
        return all(row.coverage.complete for row in self.coverage)


@dataclass(frozen=True)
class ContaminationRow:
    model: str
    display_name: str
    regular: float | None
    adv: float | None
    paper: tuple[float, float, float] | None
    """Published (regular, adv, delta), when the paper lists the model."""

    @property
    def delta(self) -> float | None:
        return None if self.regular is None or self.adv is None else self.regular - self.adv


@dataclass(frozen=True)
class Notes:
    caption: str
    source: str
    footnotes: dict[str, str] = field(default_factory=dict)
    inconsistencies: list[str] = field(default_factory=list)


def flagged_columns(paper: PaperSpec, model: str) -> frozenset[str]:
    """Main-table columns of ``model`` listed as inconsistent; ``T-1..T-4`` spans a range of groups."""
    keys = [key for key, _ in MAIN_COLUMNS]
    flagged: set[str] = set()
    for item in paper.main_table.inconsistencies:
        if item.model != model:
            continue
        first, _, last = item.column.partition("..")
        if last and first in keys and last in keys:
            flagged.update(keys[keys.index(first) : keys.index(last) + 1])
        else:
            flagged.add(item.column)
    return frozenset(flagged)


def paper_values(row: MainRow) -> dict[str, float]:
    return {
        **{g.value: v for g, v in row.groups.items()},
        OVERALL_REAL: row.overall_real,
        OVERALL_DIAG: row.overall_diag,
    }


def main_row_values(
    model: str, mode: Mode, all_tasks: Sequence[TaskSpec], lookup: ScoreLookup
) -> dict[str, float | None]:
    """Group and overall columns of one model in one mode, by the paper's aggregation rules."""
    task_scores = {}
    for task in all_tasks:
        found = lookup(model, task.name, mode) if applies(task, mode) else None
        task_scores[task.name] = found.score if found is not None else None
    groups = group_scores(task_scores, all_tasks)
    return {
        **{g.value: v for g, v in groups.items()},
        OVERALL_REAL: overall_real(groups),
        OVERALL_DIAG: overall_diag(groups),
    }


def mode_tables(
    mode: Mode,
    models: Sequence[ModelSpec],
    run_tasks: Sequence[TaskSpec],
    all_tasks: Sequence[TaskSpec],
    paper: PaperSpec,
    lookup: ScoreLookup,
) -> ModeTables:
    with_paper = mode is PAPER_MODE
    paper_rows = {row.model: row for row in paper.main_table.rows}
    tasks = [t for t in run_tasks if applies(t, mode)]
    order = {g: i for i, g in enumerate(Group)}
    tasks.sort(key=lambda t: order[t.group])

    coverage_rows = [
        CoverageRow(m.name, m.display_name, coverage(lookup(m.name, t.name, mode) for t in tasks))
        for m in models
    ]
    complete = {row.model: row.coverage.complete for row in coverage_rows}
    sections = []
    for section in Section:
        rows = [
            MainTableRow(
                model=m.name,
                display_name=m.display_name,
                size=m.size,
                ours=main_row_values(m.name, mode, all_tasks, lookup),
                paper=paper_values(paper_rows[m.name]) if with_paper and m.name in paper_rows else None,
                flagged=flagged_columns(paper, m.name) if with_paper else frozenset(),
                complete=complete[m.name],
            )
            for m in models
            if m.section is section
        ]
        if rows:
            sections.append(MainTableSection(SECTION_TITLES[section], rows))
    task_rows = [
        TaskRow(
            task=t.name,
            display_name=t.display_name,
            group=t.group.value,
            metric=t.metric.value,
            cells={m.name: lookup(m.name, t.name, mode) for m in models},
        )
        for t in tasks
    ]
    return ModeTables(mode, sections, task_rows, coverage_rows, with_paper)


def contamination_rows(
    models: Sequence[ModelSpec], all_tasks: Sequence[TaskSpec], paper: PaperSpec, lookup: ScoreLookup
) -> list[ContaminationRow]:
    """Overall Real. on the regular and the adversarial sets, beside the paper's contamination table."""
    published = {row.model: (row.regular, row.adv, row.delta) for row in paper.contamination.rows}
    return [
        ContaminationRow(
            model=m.name,
            display_name=m.display_name,
            regular=main_row_values(m.name, Mode.MULTI_IMAGE, all_tasks, lookup)[OVERALL_REAL],
            adv=main_row_values(m.name, Mode.ADVERSARIAL, all_tasks, lookup)[OVERALL_REAL],
            paper=published.get(m.name),
        )
        for m in models
    ]


def notes(paper: PaperSpec, models: Mapping[str, ModelSpec]) -> Notes:
    """Caption, source, and the footnotes and known inconsistencies of the models in the report."""
    table = paper.main_table
    return Notes(
        caption=table.caption,
        source=paper.source,
        footnotes={models[k].display_name: v for k, v in table.footnotes.items() if k in models},
        inconsistencies=[
            f"{models[i.model].display_name}, {i.column}: printed {i.printed}, "
            f"computed {i.computed}. {i.note}"
            for i in table.inconsistencies
            if i.model in models
        ],
    )


@dataclass(frozen=True)
class Report:
    run: RunSpec
    modes: list[ModeTables]
    contamination: list[ContaminationRow] | None
    notes: Notes
    columns: tuple[tuple[str, str], ...] = MAIN_COLUMNS

    @property
    def complete(self) -> bool:
        return all(m.complete for m in self.modes)


def build_report(
    run: RunSpec,
    models: Sequence[ModelSpec],
    run_tasks: Sequence[TaskSpec],
    all_tasks: Sequence[TaskSpec],
    paper: PaperSpec,
    lookup: ScoreLookup,
) -> Report:
    modes = [mode_tables(mode, models, run_tasks, all_tasks, paper, lookup) for mode in run.modes]
    both = Mode.MULTI_IMAGE in run.modes and Mode.ADVERSARIAL in run.modes
    return Report(
        run=run,
        modes=modes,
        contamination=contamination_rows(models, all_tasks, paper, lookup) if both else None,
        notes=notes(paper, {m.name: m for m in models}),
    )
