"""MileBench's part of ``check-specs``: the references between its tasks, models, runs and paper spec, its
locks, and the jobs its runs' audits plan (each file's own format is checked before, by its kind)."""

from __future__ import annotations

from pathlib import Path

from milebench.benchmarks.milebench.audit.plan import audit_jobs
from milebench.benchmarks.milebench.paper import load_paper
from milebench.benchmarks.milebench.spec.data_lock import load_lock
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.spec.base import SpecError
from milebench.spec.weights_lock import WEIGHTS_LOCK, check_weights_lock, load_weights_lock


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


def check_specs(specs_root: Path) -> str:
    specs = load_specs(specs_root)
    _check_locks(specs)
    for run in specs.runs.values():
        audit_jobs(specs, run)
    paper = load_paper(specs)
    counts = (len(specs.tasks), len(specs.models), len(specs.runs), len(paper.main_table.rows))
    return "{} tasks, {} models, {} runs, {} paper rows".format(*counts)
