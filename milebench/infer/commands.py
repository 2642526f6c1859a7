"""``milebench tiny-model`` and ``milebench infer``."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from milebench.infer.adapter import Adapter, AdapterError
from milebench.infer.engine import InferSummary
from milebench.infer.journal import CellBusy
from milebench.paths import RunPaths
from milebench.preprocess.commands import task_spec
from milebench.preprocess.regime import model_regime
from milebench.provenance import job_provenance, utc_now, write_provenance
from milebench.record_files import RecordError, read_prepared
from milebench.spec.base import SpecError
from milebench.spec.execution import for_run
from milebench.spec.model import BuiltinModel, HubWeights, ModelSpec
from milebench.spec.registry import Specs, load_specs
from milebench.spec.run import Mode, RunSpec
from milebench.spec.task import TaskSpec
from milebench.spec.weights_lock import WEIGHTS_LOCK, locked_revision
from milebench.stage_inputs import preprocess_command

log = logging.getLogger(__name__)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def limit_threads(threads: int | None) -> None:
    """Keep the model's libraries to the job's CPU allotment: without it torch starts one thread per
    core in every job, and parallel jobs (or a cluster's one-CPU slot) oversubscribe the cores."""
    if threads is None:
        return
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def split_threads(threads: int | None) -> tuple[int | None, int]:
    """The job's threads as (model threads, input workers): with two or more, one goes to a worker
    process that builds the next batch's inputs while the model generates; with one, or none given,
    inputs are built in line."""
    if threads is None or threads < 2:
        return threads, 0
    return threads - 1, 1


def model_spec(specs: Specs, name: str) -> ModelSpec:
    if name not in specs.models:
        raise SpecError(specs.root / "models", [("name", f"no model spec {name!r}")])
    return specs.models[name]


def pin_weights(spec: ModelSpec, specs_root: Path) -> ModelSpec:
    """Fill a hub spec's ``revision: null`` from the weights lock: loading and cache keys use the commit."""
    weights = spec.weights
    if not isinstance(weights, HubWeights) or weights.revision is not None:
        return spec
    commit = locked_revision(spec.name, specs_root)
    if commit is None:
        log.warning(
            "%s: no revision for %s in %s; loading the hub's current main",
            spec.name,
            weights.repo_id,
            specs_root / WEIGHTS_LOCK,
        )
        return spec
    return spec.model_copy(update={"weights": weights.model_copy(update={"revision": commit})})


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
    spec = model_spec(specs, args.model)
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
    spec = for_run(pin_weights(model_spec(specs, args.model), specs.root), run)
    tasks = [task_spec(specs, name) for name in args.task]
    mode = Mode(args.mode)
    model_threads, input_workers = split_threads(args.threads)
    limit_threads(model_threads)
    try:
        regime = model_regime(specs, run, spec.name, mode)
        start = time.perf_counter()
        adapter = load_adapter(spec, paths, paths.data_root, run.context_overflow)
    except AdapterError as err:
        log.error("%s", err)
        return 1
    log.info("%s: model loaded in %.1f s for %d task(s)", spec.name, time.perf_counter() - start, len(tasks))
    cell = CellJob(specs, run, paths, spec, mode, regime.id, adapter, input_workers)
    return max(cell.answer(task) for task in tasks)


@dataclass(frozen=True)
class CellJob:
    """What every cell of one ``infer`` process shares: the specs, the loaded model, the threads."""

    specs: Specs
    run: RunSpec
    paths: RunPaths
    spec: ModelSpec
    mode: Mode
    regime: str
    adapter: Adapter
    input_workers: int

    def answer(self, task: TaskSpec) -> int:
        """Answer one cell and write its provenance; its exit status (0, 1 or 3 as ``failure_verdict``)."""
        from milebench.infer.engine import run_model

        started = utc_now()
        spec, paths, mode = self.spec, self.paths, self.mode
        made_by = preprocess_command(self.run.name, task.name, mode, self.regime)
        out = paths.predictions(spec.name, task.name, mode)
        images = None if isinstance(spec.weights, BuiltinModel) else paths.data_root  # baselines read none
        try:
            samples = read_prepared(paths.prepared(task.name, mode, self.regime), made_by)
            summary = run_model(
                self.adapter,
                spec,
                samples,
                out,
                paths.journal(spec.name, task.name, mode),
                input_workers=self.input_workers,
                data_root=images,
                overflow=self.run.context_overflow,
            )
        except (RecordError, AdapterError, CellBusy) as err:
            log.error("%s", err)
            return 1
        record = job_provenance(
            stage="infer",
            specs=self.specs,
            run=self.run,
            model=spec,
            task=task.name,
            mode=mode.value,
            outputs=(paths.relative(out),),
            fetch_manifest=paths.fetch_manifest,
            started_at=started,
        )
        write_provenance(paths.infer_provenance(spec.name, task.name, mode), record)
        return failure_verdict(summary, self.run.max_failure_rate, out)


def failure_verdict(summary: InferSummary, max_rate: float, out: Path) -> int:
    """Exit status of a finished job: 3 when more samples failed than the run spec allows."""
    if summary.failure_rate <= max_rate:
        return 0
    kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(summary.failures.items()))
    log.error(
        "%s: %d of %d samples failed (%.1f%% > max_failure_rate %.1f%%; %s); rerun to retry only the failed",
        out,
        summary.failed,
        summary.total,
        100 * summary.failure_rate,
        100 * max_rate,
        kinds,
    )
    return 3
