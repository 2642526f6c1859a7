"""``milebench report``: gather a run's task scores and render its HTML and LaTeX report."""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

from milebench.io import atomic_write_bytes, atomic_write_text
from milebench.paths import RunPaths
from milebench.report.evidence import Evidence
from milebench.report.figures import report_figures
from milebench.report.provenance import manifests
from milebench.report.render import FIGURES, render_html, render_tex
from milebench.report.sensitivity import sensitivity_rows
from milebench.report.tables import PAPER_MODE, Report, build_report
from milebench.report.truncation import truncation_tables
from milebench.report.verdict_view import build_verdict_view
from milebench.score.aggregate import TaskScore
from milebench.spec.registry import Specs, load_specs
from milebench.spec.run import Mode, RunSpec

log = logging.getLogger(__name__)


class ScoreFileError(ValueError):
    """A task score file exists but does not hold a valid task score."""


def load_task_score(path: Path) -> TaskScore | None:
    """The task score at ``path``, or None when the file is absent (reported as a missing task)."""
    if not path.exists():
        return None
    try:
        return TaskScore.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ScoreFileError(f"{path}: not a valid task score: {err}") from None


def gather(specs: Specs, run: RunSpec, paths: RunPaths) -> Report:
    scores: dict[tuple[str, str, Mode], TaskScore | None] = {}

    def lookup(model: str, task: str, mode: Mode) -> TaskScore | None:
        key = (model, task, mode)
        if key not in scores:
            scores[key] = load_task_score(paths.task_score(model, task, mode))
        return scores[key]

    models, tasks, all_tasks = specs.run_models(run), specs.run_tasks(run), list(specs.tasks.values())
    tables = build_report(
        run=run, models=models, run_tasks=tasks, all_tasks=all_tasks, paper=specs.paper, lookup=lookup
    )
    evidence = Evidence(paths)
    return replace(
        tables,
        verdict=build_verdict_view(run, specs.paper, models, tasks, all_tasks, evidence),
        figures=report_figures(tables, models, tasks, evidence),
        manifests=manifests(paths),
        sensitivity=sensitivity_rows(models, tasks, all_tasks, lookup) if PAPER_MODE in run.modes else None,
        truncation=truncation_tables(specs, run, tasks, evidence),
    )


def write_report(report: Report, paths: RunPaths) -> None:
    """The figures first (PDF and PNG, read by the LaTeX), then the HTML and the LaTeX."""
    for figure in report.figures:
        atomic_write_bytes(paths.reports / FIGURES / f"{figure.key}.pdf", figure.pdf)
        atomic_write_bytes(paths.reports / FIGURES / f"{figure.key}.png", figure.png)
    atomic_write_text(paths.report_html, render_html(report))
    atomic_write_text(paths.report_tex, render_tex(report))


def report(args: argparse.Namespace) -> int:
    specs = load_specs(args.specs)
    run = specs.run(args.run)
    paths = RunPaths.for_run(run)
    result = gather(specs, run, paths)
    write_report(result, paths)
    if not result.complete:
        level = logging.INFO if run.allow_incomplete else logging.WARNING
        log.log(level, "run %s is incomplete: see the coverage tables of the report", run.name)
    log.info("wrote %s and %s", paths.report_html, paths.report_tex)
    return 0
