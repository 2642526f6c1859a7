"""The report's tables as plain data, laid out from the run's aggregate (``milebench aggregate``: groups,
overall columns, coverage), its task scores and the specs; templates only lay them out. Nothing here
computes a score: every group and overall value is the aggregate's."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from milebench.audit.render import AuditTable
from milebench.benchmarks.milebench.paper import PAPER_MODE, MainRow, PaperSpec
from milebench.benchmarks.milebench.plan import applies
from milebench.benchmarks.milebench.score.aggregate import OVERALL_DIAG, OVERALL_REAL, Coverage, TaskScore
from milebench.benchmarks.milebench.score.run_aggregate import ModelAggregate, RunAggregate
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import Group, TaskSpec
from milebench.report.render import DIGITS
from milebench.spec.model import ModelSpec, Section

if TYPE_CHECKING:
    from milebench.benchmarks.milebench.report.fidelity import FidelityRow
    from milebench.benchmarks.milebench.report.provenance import Provenance
    from milebench.benchmarks.milebench.report.sensitivity import SensitivityTable
    from milebench.benchmarks.milebench.report.skipped import SkippedTable
    from milebench.benchmarks.milebench.report.truncation import ModelBudget, TruncationTable
    from milebench.benchmarks.milebench.report.verdict_view import VerdictView
    from milebench.report.figure import Figure

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
    Section.USER: "Your models (not in the paper)",
}
SECTION_COLOURS: dict[Section, str] = {
    Section.CLOSED: "red",
    Section.OPEN_IMAGE: "blue",
    Section.OPEN_VIDEO: "green",
}
"""The paper marks each section's best score per column in these colours (see its caption)."""

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
    best: frozenset[str] = frozenset()
    """Columns where our value is the section's best (after rounding)."""
    paper_best: frozenset[str] = frozenset()
    """Columns where the published value is the section's best (after rounding)."""
    coverage: dict[str, float] = field(default_factory=dict)
    """Scored / expected samples of a shown column's tasks, for columns below full coverage."""


@dataclass(frozen=True)
class MainTableSection:
    title: str
    rows: list[MainTableRow]
    colour: str | None = None
    """Colour of the section's best values; None for sections the paper does not mark."""


def shown(value: float | None) -> float | None:
    """The value as printed, so ties and maxima are judged on what the reader sees."""
    return None if value is None else round(value, DIGITS)


def best_columns(values: Sequence[Mapping[str, float | None]], columns: Iterable[str]) -> list[set[str]]:
    """For each row, the columns where its printed value is the maximum of all rows (ties all win)."""
    marks: list[set[str]] = [set() for _ in values]
    for column in columns:
        printed = [shown(v.get(column)) for v in values]
        present = [p for p in printed if p is not None]
        if not present:
            continue
        top = max(present)
        for i, p in enumerate(printed):
            if p is not None and math.isclose(p, top):
                marks[i].add(column)
    return marks


def mark_best(rows: list[MainTableRow]) -> list[MainTableRow]:
    keys = [key for key, _ in MAIN_COLUMNS]
    ours = best_columns([r.ours for r in rows], keys)
    paper = best_columns([r.paper or {} for r in rows], keys)
    return [
        replace(r, best=frozenset(o), paper_best=frozenset(p))
        for r, o, p in zip(rows, ours, paper, strict=True)
    ]


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
    scored_only: dict[str, float | None] = field(default_factory=dict)
    """The two overall columns under the scored-only variant (a failure cannot lower them), shown
    beside the official ones that count every expected sample."""


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
class QuantityRow:
    """Accuracy per image-quantity level (x100), ours beside the paper's plot values (x100)."""

    model: str
    display_name: str
    ours: dict[str, float | None]
    paper: dict[str, float] | None


@dataclass(frozen=True)
class PromptlessRow:
    """A model's tasks in one mode judged against the task JSON alone: no prompt was rebuilt for them."""

    model: str
    display_name: str
    mode: Mode
    tasks: list[str]


def promptless_rows(
    run: RunSpec, models: Sequence[ModelSpec], run_tasks: Sequence[TaskSpec], lookup: ScoreLookup
) -> list[PromptlessRow]:
    """Every (model, mode) with task scores of imported official outputs scored without prompts."""
    rows = []
    for mode in run.modes:
        for m in models:
            found = [lookup(m.name, t.name, mode) for t in run_tasks if applies(t, mode)]
            names = [s.task for s in found if s is not None and not s.prompt_rebuilt]
            if names:
                rows.append(PromptlessRow(m.name, m.display_name, mode, names))
    return rows


@dataclass(frozen=True)
class Notes:
    caption: str
    source: str
    contamination_caption: str = ""
    quantity_note: str = ""
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


def main_row_values(found: ModelAggregate) -> dict[str, float | None]:
    """The main table's group and overall columns of one model in one mode, as aggregated."""
    return {key: found.columns[key].value for key, _ in MAIN_COLUMNS}


def partial_coverage(values: Mapping[str, float | None], found: ModelAggregate) -> dict[str, float]:
    """Coverage of each shown column that rests on fewer samples than expected (shown beside it)."""
    shares = {column: found.column_coverage.get(column) for column in values}
    return {
        column: share
        for column, share in shares.items()
        if values[column] is not None and share is not None and share < 1
    }


def mode_tables(
    mode: Mode,
    models: Sequence[ModelSpec],
    run_tasks: Sequence[TaskSpec],
    paper: PaperSpec,
    lookup: ScoreLookup,
    aggregate: RunAggregate,
) -> ModeTables:
    with_paper = mode is PAPER_MODE
    paper_rows = {row.model: row for row in paper.main_table.rows}
    tasks = [t for t in run_tasks if applies(t, mode)]
    order = {g: i for i, g in enumerate(Group)}
    tasks.sort(key=lambda t: order[t.group])

    found = {m.name: aggregate.model(m.name, mode) for m in models}
    coverage_rows = [
        CoverageRow(
            m.name,
            m.display_name,
            found[m.name].coverage,
            {key: found[m.name].scored_only[key] for key in (OVERALL_REAL, OVERALL_DIAG)},
        )
        for m in models
    ]
    complete = {row.model: row.coverage.complete for row in coverage_rows}
    ours = {m.name: main_row_values(found[m.name]) for m in models}
    sections = []
    for section in Section:
        rows = [
            MainTableRow(
                model=m.name,
                display_name=m.display_name,
                size=m.size,
                ours=ours[m.name],
                paper=paper_values(paper_rows[m.name]) if with_paper and m.name in paper_rows else None,
                flagged=flagged_columns(paper, m.name) if with_paper else frozenset(),
                complete=complete[m.name],
                coverage={} if complete[m.name] else partial_coverage(ours[m.name], found[m.name]),
            )
            for m in models
            if m.section is section
        ]
        if rows:
            colour = SECTION_COLOURS.get(section)
            sections.append(
                MainTableSection(SECTION_TITLES[section], mark_best(rows) if colour else rows, colour)
            )
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
    models: Sequence[ModelSpec], paper: PaperSpec, aggregate: RunAggregate
) -> list[ContaminationRow]:
    """Overall Real. on the regular and the adversarial sets, beside the paper's contamination table."""
    published = {row.model: (row.regular, row.adv, row.delta) for row in paper.contamination.rows}
    return [
        ContaminationRow(
            model=m.name,
            display_name=m.display_name,
            regular=aggregate.model(m.name, Mode.MULTI_IMAGE).columns[OVERALL_REAL].value,
            adv=aggregate.model(m.name, Mode.ADVERSARIAL).columns[OVERALL_REAL].value,
            paper=published.get(m.name),
        )
        for m in models
    ]


def quantity_rows(
    models: Sequence[ModelSpec], paper: PaperSpec, aggregate: RunAggregate
) -> list[QuantityRow]:
    """The paper's accuracy-by-image-quantity analysis: the aggregate's pooled multi-image levels."""
    published = {
        row.model: {"Few": 100 * row.few, "Medium": 100 * row.medium, "Many": 100 * row.many}
        for row in paper.image_quantity.rows
    }
    return [
        QuantityRow(
            model=m.name,
            display_name=m.display_name,
            ours={level: found.score for level, found in aggregate.model(m.name, PAPER_MODE).levels.items()},
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
        contamination_caption=paper.contamination.caption,
        quantity_note=paper.image_quantity.note,
        footnotes={models[k].display_name: v for k, v in table.footnotes.items() if k in models},
        inconsistencies=[
            f"{models[i.model].display_name}, {i.column}: printed {i.printed}, "
            f"computed {i.computed}. {i.note}"
            for i in table.inconsistencies
            if i.model in models
        ],
    )


@dataclass(frozen=True)
class PipelineCheck:
    """Whether every expected sample of every cell was answered and scored, summed over the run's modes:
    all a fixture run can tell, since its scores mean nothing."""

    cells: int
    """(model, task, mode) cells the run expects."""
    cells_missing: int
    """Cells without a task score file."""
    expected: int
    scored: int
    missing: int
    failed: int

    @property
    def passed(self) -> bool:
        return self.cells_missing == 0 and self.scored == self.expected


def pipeline_check(modes: Sequence[ModeTables]) -> PipelineCheck:
    counts = [row.coverage for m in modes for row in m.coverage]
    return PipelineCheck(
        cells=sum(c.tasks_expected for c in counts),
        cells_missing=sum(c.tasks_missing for c in counts),
        expected=sum(c.samples_expected for c in counts),
        scored=sum(c.samples_scored for c in counts),
        missing=sum(c.samples_missing for c in counts),
        failed=sum(c.samples_failed for c in counts),
    )


@dataclass(frozen=True)
class Report:
    run: RunSpec
    modes: list[ModeTables]
    contamination: list[ContaminationRow] | None
    notes: Notes
    columns: tuple[tuple[str, str], ...] = MAIN_COLUMNS
    image_quantity: list[QuantityRow] | None = None
    """Present when the run has multi-image scores."""
    verdict: VerdictView | None = None
    figures: list[Figure] = field(default_factory=list)
    provenance: Provenance | None = None
    sensitivity: list[SensitivityTable] | None = None
    """One table per variant scorer the score files carry (milebench.score.registry); None when none."""
    truncation: list[TruncationTable] = field(default_factory=list)
    budgets: list[ModelBudget] = field(default_factory=list)
    """Every run model's context budget with the source of each number (shown with truncation)."""
    fidelity: list[FidelityRow] = field(default_factory=list)
    """Every run model's execution, aspect by aspect, against the run the paper reports; none where no
    cell applies."""
    skipped: list[SkippedTable] = field(default_factory=list)
    """Per mode: skipped samples and preprocess totals per input regime, from the preprocess manifests."""
    promptless: list[PromptlessRow] = field(default_factory=list)
    """Task scores judged against the task JSON alone (imported official outputs, no prompt rebuilt)."""
    audit: list[AuditTable] = field(default_factory=list)
    """The tables of the audits the run spec declares, as ``milebench audit`` wrote them."""

    @property
    def complete(self) -> bool:
        return all(m.complete for m in self.modes)

    @property
    def fixture(self) -> bool:
        """The run reads the generated mini-MileBench: its verdict against the paper means nothing."""
        return isinstance(self.run.data, FixtureSource)

    @property
    def pipeline(self) -> PipelineCheck:
        return pipeline_check(self.modes)

    @property
    def headers(self) -> dict[str, str]:
        """Column key -> header as printed (``overall_real`` -> ``Overall Real.``)."""
        return dict(self.columns)


def build_report(
    run: RunSpec,
    models: Sequence[ModelSpec],
    run_tasks: Sequence[TaskSpec],
    paper: PaperSpec,
    lookup: ScoreLookup,
    aggregate: RunAggregate,
) -> Report:
    """The tables of every mode of the run: numbers from ``aggregate``, task cells from ``lookup``."""
    modes = [mode_tables(mode, models, run_tasks, paper, lookup, aggregate) for mode in run.modes]
    both = Mode.MULTI_IMAGE in run.modes and Mode.ADVERSARIAL in run.modes
    return Report(
        run=run,
        modes=modes,
        contamination=contamination_rows(models, paper, aggregate) if both else None,
        notes=notes(paper, {m.name: m for m in models}),
        image_quantity=quantity_rows(models, paper, aggregate) if PAPER_MODE in run.modes else None,
        promptless=promptless_rows(run, models, run_tasks, lookup),
    )
