"""``milebench show``: a run's per-sample logs (``milebench.benchmarks.milebench.score.sample_log``),
printed or filtered.

A filter that names nothing the run has (a model, task or mode outside it, a sample id in none of the
chosen cells) is an argument error, so a typo never reads as "no such samples"."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterable
from pathlib import Path

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import Cell, cells
from milebench.benchmarks.milebench.score.sample_log import SampleLog
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.record_files import read_records
from milebench.spec.names import UnknownName, check_in_run
from milebench.stage_inputs import MissingInput, command

log = logging.getLogger(__name__)

ANY_FAILURE = "any"
"""``--failure`` alone: every failed sample, whatever its kind."""
SHOWN = 60
"""Characters of a gold or answer text a line shows (``--json`` shows them whole)."""


def chosen_cells(args: argparse.Namespace) -> tuple[list[Cell], Path]:
    """The run's cells that ``--model``, ``--task`` and ``--mode`` keep, and the run spec file."""
    specs = load_specs(args.specs)
    run = specs.run(args.run)
    run_file = specs.root / "runs" / f"{run.name}.yaml"
    for model in args.model or ():
        check_in_run("model", model, run.name, run.models, run_file)
    for task in args.task or ():
        check_in_run("task", task, run.name, {t.name for t in specs.run_tasks(run)}, run_file)
    for mode in args.mode or ():
        check_in_run("mode", mode.value, run.name, {m.value for m in run.modes}, run_file)
    kept = [
        cell
        for cell in cells(specs, run)
        if (not args.model or cell.model in args.model)
        and (not args.task or cell.task in args.task)
        and (not args.mode or cell.mode in args.mode)
    ]
    return kept, run_file


def keeps(row: SampleLog, args: argparse.Namespace) -> bool:
    """Whether a sample passes the sample filters (id, correct or incorrect, status, failure)."""
    return (
        (not args.sample or row.sample_id in args.sample)
        and (not args.correct or row.correct)
        and (not args.incorrect or (row.status == "scored" and not row.correct))
        and (args.status is None or row.status == args.status)
        and (
            args.failure is None
            or (row.failure is not None and args.failure in (ANY_FAILURE, row.failure.value))
        )
    )


def one_line(text: str | None) -> str:
    if text is None:
        return "-"
    flat = json.dumps(text, ensure_ascii=False)[1:-1]
    return flat if len(flat) <= SHOWN else flat[: SHOWN - 3] + "..."


def line(row: SampleLog) -> str:
    score = "-" if row.score is None else f"{row.score:g}"
    failure = "" if row.failure is None else f" ({row.failure.value})"
    return "\t".join(
        (
            row.model,
            row.mode.value,
            row.task,
            str(row.sample_id),
            row.status + failure,
            score,
            one_line(row.extracted),
            one_line(row.gold),
            one_line(row.answer),
        )
    )


HEADER = "\t".join(("model", "mode", "task", "sample", "status", "score", "extracted", "gold", "answer"))


def write(rows: Iterable[SampleLog], as_json: bool) -> None:
    if as_json:
        sys.stdout.writelines(row.model_dump_json() + "\n" for row in rows)
    else:
        sys.stdout.writelines([HEADER + "\n", *(line(row) + "\n" for row in rows)])


def show(args: argparse.Namespace) -> int:
    chosen, run_file = chosen_cells(args)
    paths = RunPaths.for_run(load_specs(args.specs).run(args.run), base=args.root)
    files = [paths.samples(*cell) for cell in chosen]
    present = [path for path in files if path.exists()]
    if not present:
        raise MissingInput(
            files[0],
            f"the per-sample log of any of the {len(files)} chosen cells of run {args.run}",
            command("score", run=args.run),
        )
    if len(present) < len(files):
        log.warning("%d of the %d chosen cells are not scored yet", len(files) - len(present), len(files))
    rows = [row for path in present for row in read_records(path, SampleLog)]
    unknown = sorted(set(args.sample or ()) - {row.sample_id for row in rows})
    if unknown:
        raise UnknownName(
            run_file, "samples", "--sample", f"sample {unknown[0]} is in none of the chosen cells"
        )
    shown = [row for row in rows if keeps(row, args)]
    write(shown, args.json)
    log.info("%d of %d samples in %d cells", len(shown), len(rows), len(present))
    return 0
