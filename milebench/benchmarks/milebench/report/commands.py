"""``milebench report``: render a run's HTML and LaTeX report from its aggregate, verdict and task scores.

Every group and overall number, interval and verdict state is ``milebench aggregate``'s (aggregate.json
and verdict.json): the report lays them out and computes none of them.

A run with missing or failed predictions, or without some task score files, is refused (exit 1, naming
the run spec file, its ``allow_incomplete`` field and every incomplete cell) unless the run spec sets
``allow_incomplete: true``; then the report is built and shows the coverage beside each number.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from milebench.benchmarks.milebench.paper import PAPER_MODE, load_paper
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import cells
from milebench.benchmarks.milebench.report.audit import audit_tables
from milebench.benchmarks.milebench.report.evidence import Evidence
from milebench.benchmarks.milebench.report.fidelity import fidelity_rows, telling
from milebench.benchmarks.milebench.report.figures import report_figures
from milebench.benchmarks.milebench.report.provenance import run_provenance
from milebench.benchmarks.milebench.report.render import render_html, render_provenance_tex, render_tex
from milebench.benchmarks.milebench.report.sensitivity import sensitivity_tables
from milebench.benchmarks.milebench.report.skipped import skipped_tables
from milebench.benchmarks.milebench.report.tables import Report, build_report
from milebench.benchmarks.milebench.report.truncation import budget_rows, truncation_tables
from milebench.benchmarks.milebench.report.verdict_view import build_verdict_view
from milebench.benchmarks.milebench.score.aggregate import TaskScore
from milebench.benchmarks.milebench.score.run_aggregate import (
    IncompleteCell,
    IncompleteError,
    RunAggregate,
    incomplete_cells,
    require_complete,
    require_scores,
)
from milebench.benchmarks.milebench.score.run_files import RunFiles
from milebench.benchmarks.milebench.score.verdict import Verdict
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.run import Mode, RunSpec, has_verdict
from milebench.errors import KitError
from milebench.io import atomic_write_bytes, atomic_write_text
from milebench.record_files import read_record
from milebench.report.render import FIGURES
from milebench.stage_inputs import command

log = logging.getLogger(__name__)


class ScoreFileError(KitError, ValueError):
    """A task score file exists but does not hold a valid task score."""


class ReportFiles(RunFiles):
    """The run's files, read once each; an absent task score is None (a missing task), a bad one is named."""

    def task_score(self, model: str, task: str, mode: Mode) -> TaskScore | None:
        try:
            return super().task_score(model, task, mode)
        except ValueError as err:
            path = self.paths.task_score(model, task, mode)
            raise ScoreFileError(f"{path}: not a valid task score: {err}") from None


class StaleAggregateError(KitError, ValueError):
    """aggregate.json or verdict.json was written for another run, or before the run's models or modes."""


def read_aggregate(run: RunSpec, paths: RunPaths) -> tuple[RunAggregate, Verdict | None]:
    """The run's aggregate and, for a run with multi-image scores, its verdict, as ``milebench aggregate``
    wrote them; one of another run or missing a model or mode of this one is refused by name."""
    made_by = command("aggregate", run=run.name)
    aggregate = read_record(paths.aggregate_json, RunAggregate, "run aggregate", made_by)
    verdict = None
    if has_verdict(run):
        verdict = read_record(paths.verdict_json, Verdict, "run verdict", made_by)
    expected = [(model, mode) for model in run.models for mode in run.modes]
    found = {(m.model, m.mode) for m in aggregate.models}
    missing = [f"{model}/{mode.value}" for model, mode in expected if (model, mode) not in found]
    for path, written in (
        (paths.aggregate_json, aggregate.run),
        (paths.verdict_json, verdict and verdict.run),
    ):
        if written not in (None, run.name):
            raise StaleAggregateError(
                f"{path}: written for run {written!r}, not {run.name!r}; run {made_by} again"
            )
    if missing:
        raise StaleAggregateError(
            f"{paths.aggregate_json}: has no columns of {', '.join(missing)} of run {run.name!r} (written "
            f"before the run spec changed?); run {made_by} again"
        )
    return aggregate, verdict


def gather(specs: Specs, run: RunSpec, paths: RunPaths, files: ReportFiles | None = None) -> Report:
    lookup = (files or ReportFiles(paths)).task_score
    aggregate, verdict = read_aggregate(run, paths)
    models, tasks, paper = specs.run_models(run), specs.run_tasks(run), load_paper(specs)
    tables = build_report(
        run=run, models=models, run_tasks=tasks, paper=paper, lookup=lookup, aggregate=aggregate
    )
    evidence = Evidence(paths)
    return replace(
        tables,
        verdict=build_verdict_view(run, paper, models, verdict),
        figures=report_figures(tables, models, tasks, evidence),
        provenance=run_provenance(paths, cells(specs, run)),
        sensitivity=sensitivity_tables(models, tasks, aggregate) if PAPER_MODE in run.modes else None,
        truncation=truncation_tables(specs, run, tasks, evidence),
        budgets=budget_rows(specs, run),
        fidelity=telling(fidelity_rows(specs, run)),
        skipped=skipped_tables(specs, run, tasks, paths),
        audit=audit_tables(specs, run, paths),
    )


def refusal(run_file: Path, cells: Sequence[IncompleteCell], files: RunFiles) -> str:
    """Why the report is refused: the run spec file, the field to set, each cell's missing/failed counts."""
    lines = [
        f"{run_file}: allow_incomplete: refusing to build the report of run {run_file.stem!r} from "
        f"incomplete predictions ({len(cells)} incomplete cell(s)). Complete them, or set "
        "`allow_incomplete: true` in this run spec to build the report with coverage shown."
    ]
    for cell in cells:
        found = files.task_score(cell.model, cell.task, cell.mode)
        counts = "" if found is None else f"; {found.n_missing} missing, {found.n_failed} failed of {found.n}"
        lines.append(f"  {cell.describe()}{counts}")
    return "\n".join(lines)


def write_report(report: Report, paths: RunPaths) -> None:
    """The figures first (PDF and PNG, read by the LaTeX), then the HTML and the LaTeX (the report and its
    provenance document)."""
    for figure in report.figures:
        atomic_write_bytes(paths.reports / FIGURES / f"{figure.key}.pdf", figure.pdf)
        atomic_write_bytes(paths.reports / FIGURES / f"{figure.key}.png", figure.png)
    atomic_write_text(paths.report_html, render_html(report))
    atomic_write_text(paths.report_tex, render_tex(report))
    atomic_write_text(paths.report_provenance_tex, render_provenance_tex(report))


def report(args: argparse.Namespace) -> int:
    specs = load_specs(args.specs)
    return report_run(specs, specs.run(args.run), args.root)


def report_run(specs: Specs, run: RunSpec, root: Path = Path(".")) -> int:
    """Render the run's report from its aggregate and score files; 1 (logged) for a refused incomplete run."""
    paths = RunPaths.for_run(run, base=root)
    files = ReportFiles(paths)
    require_scores(run, specs.run_tasks(run), files)
    try:
        require_complete(run, incomplete_cells(run, specs.run_tasks(run), files))
    except IncompleteError as err:
        log.error("%s", refusal(specs.root / "runs" / f"{run.name}.yaml", err.cells, files))
        return 1
    result = gather(specs, run, paths, files)
    write_report(result, paths)
    log.info("wrote %s, %s and %s", paths.report_html, paths.report_tex, paths.report_provenance_tex)
    return 0
