"""One cell of an ``infer`` job: a task's prepared samples answered by the loaded model, with the cell's own
journal, lock, predictions and provenance, and its exit status against the run's failure budget."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.provenance import job_provenance, write_provenance
from milebench.benchmarks.milebench.records import preprocess_command, read_prepared
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.infer.adapter import Adapter, AdapterError
from milebench.infer.engine import InferSummary
from milebench.infer.journal import CellBusy
from milebench.provenance import utc_now
from milebench.record_files import RecordError
from milebench.spec.model import BuiltinModel, ModelSpec
from milebench.spec.policy import RunPolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CellJob:
    """What every cell of one ``infer`` process shares: the specs, the loaded model, the job's policy (the
    one the model was built with), the threads."""

    specs: Specs
    run: RunSpec
    paths: RunPaths
    spec: ModelSpec
    mode: Mode
    regime: str
    adapter: Adapter
    policy: RunPolicy
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
                policy=self.policy,
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
        return failure_verdict(summary, self.policy.max_failure_rate, out)


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
