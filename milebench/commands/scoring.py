"""``milebench score`` and ``milebench import-official``: score a run's own predictions, or bring an official
run's ``pred.json`` files in, score them, and render the report when asked. Here, above both the scoring
and the report packages, because an import ends in a report."""

from __future__ import annotations

import argparse
import logging

from milebench.paths import RunPaths
from milebench.plan import applies
from milebench.score.commands import score_one_task
from milebench.score.official import PRED_FILE, import_task, score_imported, write_predictions
from milebench.score.run_aggregate import write_aggregate
from milebench.spec.names import check_in_run
from milebench.spec.registry import load_specs
from milebench.spec.run import Mode
from milebench.stage_inputs import OFFICIAL_CODE, command, require

log = logging.getLogger(__name__)


def score(args: argparse.Namespace) -> int:
    """Score one task's predictions, or, with ``--official-outputs``, every task of an official run."""
    return score_one_task(args) if args.outputs is None else import_official(args)


def import_official(args: argparse.Namespace) -> int:
    specs = load_specs(args.specs)
    run = specs.run(args.run)
    mode = Mode(args.mode)
    check_in_run("model", args.model, run.name, run.models, specs.root / "runs" / f"{run.name}.yaml")
    require(args.outputs, "official outputs folder", OFFICIAL_CODE)
    fetch = command("fetch", run=run.name)
    if args.data_dir is not None:
        require(args.data_dir, "MileBench data folder", fetch)
    paths = RunPaths.for_run(run, base=args.root)
    imported = []
    for task in specs.run_tasks(run):
        if not applies(task, mode):
            continue
        data_root = args.data_dir or paths.data_root
        found = import_task(task, mode, args.model, args.outputs, data_root, fetch)
        if found is None:
            log.warning("%s: no %s; the task's samples stay missing", args.outputs / task.name, PRED_FILE)
            continue
        imported.append(found)
    for found in imported:  # every file is read and checked before the first is written
        write_predictions(paths, args.model, mode, found)
        score_imported(specs, run, paths, args.model, found, mode, args.data_dir)
    if not imported:
        log.error("%s: no <Task>/%s of any task of run %s", args.outputs, PRED_FILE, run.name)
        return 1
    if not args.report:
        return 0
    from milebench.report.commands import report_run  # the report loads matplotlib: only when asked

    return write_aggregate(specs, run, root=args.root) or report_run(specs, run, args.root)
