"""``milebench audit batch`` and ``milebench audit drift``: the tables to stdout, the full result as
JSON and the tables as Markdown under ``reports/<run>/audit/`` (or ``--out``)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from milebench.audit.batch import BatchAudit, batch_audit
from milebench.audit.render import batch_markdown
from milebench.benchmarks.milebench.audit.answer_score import answer_score
from milebench.benchmarks.milebench.audit.drift import DriftAudit, Side, drift_audit
from milebench.benchmarks.milebench.audit.drift_render import drift_markdown
from milebench.benchmarks.milebench.audit.plan import batch_name, drift_name, scorer_problems
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import mode_tasks
from milebench.benchmarks.milebench.records import preprocess_command, read_prepared
from milebench.benchmarks.milebench.score.inputs import read_predictions
from milebench.benchmarks.milebench.score.run_files import RunFiles
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.io import atomic_write_json, atomic_write_text
from milebench.score.registry import scorer as judge_of
from milebench.spec.base import SpecError
from milebench.spec.execution import PAPER
from milebench.spec.model_execution import execution_of, variant_problem
from milebench.spec.names import check_in_run
from milebench.spec.policy import run_policy
from milebench.stage_inputs import MissingInput, command

log = logging.getLogger(__name__)


def run_file(specs: Specs, run: str) -> Path:
    return specs.root / "runs" / f"{run}.yaml"


def check_model(specs: Specs, run: str, model: str) -> None:
    check_in_run("model", model, run, specs.run(run).models, run_file(specs, run))


def check_scorer(specs: Specs, run: str, scorer: str) -> None:
    problems = scorer_problems("scorer", scorer)
    if problems:
        raise SpecError(run_file(specs, run), problems)


def write_outputs(out: Path, record: BatchAudit | DriftAudit, markdown: str) -> None:
    """The record as JSON at ``out`` and its tables beside it (``.md``); the tables to stdout."""
    atomic_write_json(out, record.model_dump(mode="json"))
    atomic_write_text(out.with_suffix(".md"), markdown)
    sys.stdout.write(markdown)
    log.info("wrote %s and %s", out, out.with_suffix(".md"))


def batch_command(args: argparse.Namespace) -> int:
    from milebench.audit.trace import traced
    from milebench.benchmarks.milebench.preprocess.regime import model_regime
    from milebench.infer.registry import load_adapter

    specs = load_specs(args.specs)
    run = specs.run(args.run)
    check_model(specs, run.name, args.model)
    check_scorer(specs, run.name, args.scorer)
    spec = specs.loaded_model(run, args.model)
    if args.variant is not None:
        problem = variant_problem(spec, args.variant)
        execution = execution_of(spec)
        if problem is not None:
            raise SpecError(specs.root / "models" / f"{spec.name}.yaml", [("execution.variants", problem)])
        if execution is not None and args.variant != PAPER:
            spec = spec.model_copy(update={"execution": execution.with_variant(args.variant)})
    mode = Mode(args.mode)
    tasks = {name: specs.task(name) for name in args.task}
    paths = RunPaths.for_run(run, base=args.root)
    regime = model_regime(specs, run, spec.name, mode).id
    samples = [
        s
        for name in tasks
        for s in read_prepared(
            paths.prepared(name, mode, regime), preprocess_command(run.name, name, mode, regime)
        )
    ]
    adapter = load_adapter(spec, paths, paths.data_root, run_policy(run, spec))
    summary, changes = batch_audit(
        lambda batch: traced(adapter, batch),
        samples,
        answer_score(tasks, judge_of(args.scorer)),
        args.batch_sizes,
        args.repeats,
        args.seed,
        args.tie_margin,
    )
    execution = execution_of(spec)
    record = BatchAudit(
        model=spec.name,
        execution=execution.label if execution is not None else PAPER,
        scorer=args.scorer,
        batch_sizes=args.batch_sizes,
        repeats=args.repeats,
        seed=args.seed,
        tie_margin=args.tie_margin,
        summary=tuple(summary),
        samples=tuple(changes),
    )
    out = args.out or paths.audit(batch_name(spec.name, mode, args.variant))
    write_outputs(out, record, batch_markdown(record))
    return 0


def side(specs: Specs, run: str, model: str, root: Path, mode: Mode, scorer: str) -> Side:
    """One side's judgments (under ``scorer``) and predictions of every task of its run in ``mode``."""
    paths = RunPaths.for_run(specs.run(run), base=root)
    files = RunFiles(paths)
    tasks = mode_tasks(specs, specs.run(run)).get(mode, [])
    judgments = {
        name: [j for j in files.judgments(model, name, mode) if j.scorer == scorer] for name in tasks
    }
    judgments = {name: rows for name, rows in judgments.items() if rows}
    if not judgments:
        made_by = command("score", run=run, model=model, task="<Task>", mode=mode)
        raise MissingInput(paths.judgments(model, "<Task>", mode), f"{scorer} judgments", made_by)
    predictions = {
        name: read_predictions(paths.predictions(model, name, mode), name, model, mode)
        for name in judgments
        if paths.predictions(model, name, mode).exists()
    }
    label = f"{run}/{model}" + ("" if root == Path(".") else f" ({root})")
    return Side(label, judgments, predictions)


def drift_command(args: argparse.Namespace) -> int:
    specs = load_specs(args.specs)
    run_b = args.run_b or args.run
    model_b = args.model_b or args.model_a
    root_b = args.root_b or args.root
    if (args.run, args.model_a, args.root) == (run_b, model_b, root_b):
        raise SpecError(
            run_file(specs, args.run), [("models", "drift needs two sides: another model, run or --root-b")]
        )
    check_model(specs, args.run, args.model_a)
    check_model(specs, run_b, model_b)
    check_scorer(specs, args.run, args.scorer)
    mode = Mode(args.mode)
    a = side(specs, args.run, args.model_a, args.root, mode, args.scorer)
    b = side(specs, run_b, model_b, root_b, mode, args.scorer)
    record = drift_audit(a, b, list(specs.tasks.values()), args.scorer, args.resamples, args.seed)
    if len(record.tasks) < 2:
        log.error("no task has samples judged on both sides (run the score stage for both first)")
        return 1
    paths = RunPaths.for_run(specs.run(args.run), base=args.root)
    out = args.out or paths.audit(drift_name(args.model_a, model_b, mode, args.run_b))
    write_outputs(out, record, drift_markdown(record))
    return 0
