"""``milebench preprocess``: turn one task's upstream JSON into the prepared JSONL of one input regime."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from milebench.benchmarks.milebench.data.schema import TaskFile, task_json_path
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.prepare import load_budget, manifest, prepare_task
from milebench.benchmarks.milebench.preprocess.prompt import PreprocessError
from milebench.benchmarks.milebench.preprocess.regime import run_regimes, tokenizer_dirs
from milebench.benchmarks.milebench.preprocess.subset import subset
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.samples import warn_if_short
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.io import atomic_write_json, atomic_write_jsonl, sha256_file
from milebench.preprocess.tokenizer import TokenizerError
from milebench.spec.base import SpecError, validate_mapping
from milebench.stage_inputs import command, require

log = logging.getLogger(__name__)


def read_task_file(path: Path) -> TaskFile:
    """Parse and validate an upstream task JSON; errors name the file (and the field)."""
    try:
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise PreprocessError(f"{path}: task file not found (has the data been fetched?)") from None
    except json.JSONDecodeError as err:
        raise PreprocessError(f"{path}: invalid JSON: {err}") from None
    return validate_mapping(path, data, TaskFile)


def task_source(task: TaskSpec, mode: Mode, data_root: Path) -> Path:
    """The upstream file a mode reads: ``<Task>-adv.json`` for adversarial, else ``<Task>.json``."""
    adversarial = mode is Mode.ADVERSARIAL
    if adversarial and not task.has_adversarial:
        raise PreprocessError(f"task {task.name} has no adversarial set; mode {mode} does not apply to it")
    return data_root / task_json_path(task.name, adversarial=adversarial)


def preprocess(args: argparse.Namespace) -> int:
    specs = load_specs(args.specs)
    run = specs.run(args.run)
    paths = RunPaths.for_run(run, base=args.root)
    task = specs.task(args.task)
    mode = Mode(args.mode)
    regimes = run_regimes(specs, run, mode)
    if args.regime not in regimes:
        known = ", ".join(regimes)
        raise SpecError(
            specs.root / "runs" / f"{run.name}.yaml",
            [
                (
                    "models",
                    f"no model of run {run.name!r} "
                    f"reads regime {args.regime!r} in mode {mode}; known: {known}",
                )
            ],
        )
    regime, models = regimes[args.regime]
    try:
        source = task_source(task, mode, paths.data_root)
        require(source, "task file", command("fetch", run=run.name))
        for folder in tokenizer_dirs(regime, paths):
            require(folder, "tiny model checkpoint", command("tiny-model", run=run.name, model=folder.name))
        task_file = read_task_file(source)
        n_samples = len(task_file.data)
        warn_if_short(task, run, n_samples, source)
        task_file = task_file.model_copy(update={"data": subset(task.name, task_file.data, run.limit)})
        budget = load_budget(regime, paths)
        prepared = prepare_task(
            task,
            task_file,
            source,
            mode,
            regime,
            budget,
            paths,
            run.skip_bad_samples,
            args.workers,
            run.max_image_pixels,
        )
    except (PreprocessError, TokenizerError) as err:
        log.error("%s", err)
        return 1
    record = manifest(
        prepared, task, mode, regime, models, paths.relative(source), sha256_file(source), n_samples
    )
    paths.tiles(task.name, mode, regime.id).mkdir(parents=True, exist_ok=True)  # an output, empty if unused
    atomic_write_json(paths.prepared_manifest(task.name, mode, regime.id), record.model_dump(mode="json"))
    out = paths.prepared(task.name, mode, regime.id)
    atomic_write_jsonl(out, (s.model_dump(mode="json") for s in prepared.samples))
    log.info(
        "%s %s %s: %d samples (%d skipped, %d truncated) -> %s",
        task.name,
        mode,
        regime.id,
        len(prepared.samples),
        len(prepared.skipped),
        record.n_truncated,
        out,
    )
    return 0
