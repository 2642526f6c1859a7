"""``milebench tiny-model`` and ``milebench infer``."""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from pathlib import Path

from milebench.benchmarks.milebench.infer.cell import CellJob
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.infer.adapter import AdapterError, Preflight
from milebench.infer.threads import limit_threads, split_threads
from milebench.spec.policy import run_policy

log = logging.getLogger(__name__)


def install_dir(build: Path, target: Path) -> None:
    """Replace ``target`` by ``build`` (same file system): readers never see a half-written model."""
    if target.exists():
        old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old."))
        target.rename(old / target.name)
        build.rename(target)
        shutil.rmtree(old)
    else:
        build.rename(target)


def tiny_model(args: argparse.Namespace) -> int:
    from milebench.infer.tiny import build_tiny

    specs = load_specs(args.specs)
    paths = RunPaths.for_run(specs.run(args.run), base=args.root)
    spec = specs.model(args.model)
    target = paths.model_dir(spec.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.build."))
    build.chmod(0o755)
    try:
        build_tiny(spec, build)
        install_dir(build, target)
    except AdapterError as err:
        log.error("%s", err)
        return 1
    finally:
        shutil.rmtree(build, ignore_errors=True)
    log.info("tiny model %s -> %s", spec.name, target)
    return 0


def infer(args: argparse.Namespace) -> int:
    """Answer every ``--task`` given in ``--mode``, each cell with its own journal, lock, predictions and
    provenance, after loading the model once: one job per (model, mode) pays the load once, not once per
    task. A cell that cannot run (its prepared file unreadable, another job on it) is named and the other
    cells still run; the exit status is the worst of the cells'."""
    from milebench.infer.registry import load_adapter

    specs = load_specs(args.specs)
    run = specs.run(args.run)
    paths = RunPaths.for_run(run, base=args.root)
    spec = specs.loaded_model(run, args.model)
    policy = run_policy(run, spec)
    tasks = [specs.task(name) for name in args.task]
    mode = Mode(args.mode)
    model_threads, input_workers = split_threads(args.threads)
    limit_threads(model_threads)
    try:
        regime = model_regime(specs, run, spec.name, mode)
        start = time.perf_counter()
        adapter = load_adapter(spec, paths, paths.data_root, policy)
        if isinstance(adapter, Preflight):
            adapter.preflight()
    except AdapterError as err:
        log.error("%s", err)
        return 1
    log.info("%s: model loaded in %.1f s for %d task(s)", spec.name, time.perf_counter() - start, len(tasks))
    cell = CellJob(specs, run, paths, spec, mode, regime.id, adapter, policy, input_workers)
    return max(cell.answer(task) for task in tasks)
