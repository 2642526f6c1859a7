"""CLI handlers ``check-specs`` and ``export-schemas``: validate the specs folder, publish its schemas."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pydantic import BaseModel

from milebench.audit.plan import audit_jobs
from milebench.io import atomic_write_text
from milebench.spec.base import SpecError
from milebench.spec.data_lock import DataLock, load_lock
from milebench.spec.model import ModelSpec
from milebench.spec.paper import PaperSpec
from milebench.spec.registry import Specs, load_specs
from milebench.spec.run import RunSpec
from milebench.spec.task import TaskSpec
from milebench.spec.weights_lock import (
    WEIGHTS_LOCK,
    WeightsLock,
    check_weights_lock,
    load_weights_lock,
)

log = logging.getLogger(__name__)

SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "task": TaskSpec,
    "model": ModelSpec,
    "run": RunSpec,
    "paper": PaperSpec,
    "data-lock": DataLock,
    "weights-lock": WeightsLock,
}


def _check_locks(specs: Specs) -> None:
    """Locks are outside ``load_specs``; validate their format (resolution is checked when fetching)."""
    for name, run in specs.runs.items():
        lock_ref = getattr(run.data, "lock", None)
        if lock_ref is None:
            continue
        lock_path = specs.file(lock_ref)
        if not lock_path.exists():
            raise SpecError(specs.file(f"runs/{name}.yaml"), [("data.lock", f"no file {lock_path}")])
        load_lock(lock_path, require_complete=False)
    weights_path = specs.file(WEIGHTS_LOCK)
    if weights_path.exists():
        check_weights_lock(load_weights_lock(weights_path), specs.models, weights_path)


def check(args: argparse.Namespace) -> int:
    """Load every spec and lock; a SpecError propagates so the CLI reports it and exits 2."""
    specs = load_specs(args.specs)
    _check_locks(specs)
    for run in specs.runs.values():
        audit_jobs(specs, run)
    log.info(
        "specs OK: %d tasks, %d models, %d runs, %d paper rows",
        len(specs.tasks),
        len(specs.models),
        len(specs.runs),
        len(specs.paper.main_table.rows),
    )
    return 0


def schema_text(model: type[BaseModel]) -> str:
    """Deterministic JSON Schema text, so a stale committed schema shows up as a byte difference."""
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def export(args: argparse.Namespace) -> int:
    """Write ``<name>.schema.json`` for each spec model into ``args.out`` (for editors and reviewers)."""
    out = Path(args.out)
    for name, model in SCHEMA_MODELS.items():
        atomic_write_text(out / f"{name}.schema.json", schema_text(model))
    log.info("wrote %d schemas to %s", len(SCHEMA_MODELS), out)
    return 0
