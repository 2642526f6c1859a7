"""``milebench preprocess``: turn one task's upstream JSON into the prepared JSONL of a run."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from milebench.data.schema import TaskFile, task_json_path
from milebench.io import atomic_write_jsonl
from milebench.paths import RunPaths
from milebench.preprocess.prompt import PreprocessError, build_samples
from milebench.spec.base import SpecError, validate_mapping
from milebench.spec.registry import Specs, load_specs
from milebench.spec.run import Mode
from milebench.spec.task import TaskSpec

log = logging.getLogger(__name__)


def task_spec(specs: Specs, name: str) -> TaskSpec:
    if name not in specs.tasks:
        raise SpecError(specs.root / "tasks", [("name", f"no task spec {name!r}")])
    return specs.tasks[name]


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
    paths = RunPaths.for_run(specs.run(args.run))
    task = task_spec(specs, args.task)
    mode = Mode(args.mode)
    try:
        source = task_source(task, mode, paths.data_root)
        samples = build_samples(task, read_task_file(source), mode, paths.data_root, source)
    except PreprocessError as err:
        log.error("%s", err)
        return 1
    out = paths.prepared(task.name, mode)
    atomic_write_jsonl(out, (s.model_dump(mode="json") for s in samples))
    log.info("%s %s: %d samples -> %s", task.name, mode, len(samples), out)
    return 0
