"""``milebench score`` and ``milebench import-official``: score a run's own predictions, or bring an official
run's ``pred.json`` files (or lmms-eval's or VLMEvalKit's prediction files) in, score them, and render the
report when asked. Here, above both the scoring
and the report packages, because an import ends in a report."""

from __future__ import annotations

import argparse
import logging

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import applies
from milebench.benchmarks.milebench.score.commands import score_one_task
from milebench.benchmarks.milebench.score.foreign import FORMATS
from milebench.benchmarks.milebench.score.new_model import new_model
from milebench.benchmarks.milebench.score.official import import_task, score_imported, write_predictions
from milebench.benchmarks.milebench.score.run_aggregate import write_aggregate
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.samples import warn_if_short
from milebench.spec.names import check_in_run
from milebench.stage_inputs import command, given

log = logging.getLogger(__name__)


def score(args: argparse.Namespace) -> int:
    """Score one task's predictions, or, with ``--official-outputs``, every task of an official run."""
    return score_one_task(args) if args.outputs is None else import_official(args)


def import_official(args: argparse.Namespace) -> int:
    specs = load_specs(args.specs)
    run = specs.run(args.run)
    mode = Mode(args.mode)
    fmt = FORMATS[getattr(args, "format", "official")]
    given(args.outputs, "--official-outputs", "official outputs folder")
    added = None
    if getattr(args, "new_model", None) is not None:
        added = new_model(specs, run, args.model, args.new_model or args.model, args.outputs)
        specs, run = added.specs, added.run
    check_in_run("model", args.model, run.name, run.models, specs.root / "runs" / f"{run.name}.yaml")
    fetch = command("fetch", run=run.name)
    if args.data_dir is not None:
        given(args.data_dir, "--data-dir", "MileBench data folder")
    paths = RunPaths.for_run(run, base=args.root)
    imported = []
    for task in specs.run_tasks(run):
        if not applies(task, mode):
            continue
        data_root = args.data_dir or paths.data_root
        found = import_task(
            task, mode, args.model, args.outputs, data_root, None if args.data_dir is not None else fetch, fmt
        )
        if found is None:
            log.warning("%s: no %s of %s; its samples stay missing", args.outputs, fmt.looked_for, task.name)
            continue
        warn_if_short(task, run, len(found.task_file.data), found.source)
        imported.append(found)
    if not imported:
        log.error("%s: no %s of any task of run %s", args.outputs, fmt.looked_for, run.name)
        return 1
    if added is not None:
        added.write()
    for found in imported:  # every file is read and checked before the first is written
        write_predictions(paths, args.model, mode, found)
        score_imported(specs, run, paths, args.model, found, mode, args.data_dir)
    if not args.report:
        return 0
    from milebench.benchmarks.milebench.report.commands import (
        report_run,  # the report loads matplotlib: only when asked
    )

    return write_aggregate(specs, run, root=args.root) or report_run(specs, run, args.root)
