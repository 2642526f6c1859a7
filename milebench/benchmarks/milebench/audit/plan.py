"""The audits a run spec declares (its ``audit:`` section) as jobs: the tasks each reads, the file it
writes (``RunPaths.audit``) and its ``milebench audit`` arguments, checked against the specs.

The names the loader checks (models, variants, modes, tasks of the run, the other run) are known good
here; this adds what needs the scorers and the task specs: scorer names, tasks that have no set in the
mode, two audits writing one file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import mode_tasks
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import BatchAuditPlan, DriftAuditPlan, Mode, RunSpec
from milebench.score.registry import scorer_names
from milebench.spec.base import SpecError
from milebench.spec.execution import PAPER
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import for_run


def batch_name(model: str, mode: Mode, variant: str | None = None) -> str:
    """The JSON file of a batch audit (its Markdown tables go beside it as ``.md``)."""
    chosen = "" if variant in (None, PAPER) else f"-{variant}"
    return f"batch-{model}{chosen}-{mode.value}.json"


def drift_name(model_a: str, model_b: str, mode: Mode, run_b: str | None = None) -> str:
    other = "" if run_b is None else f"-{run_b}"
    return f"drift-{model_a}-{model_b}{other}-{mode.value}.json"


@dataclass(frozen=True)
class BatchJob:
    plan: BatchAuditPlan
    tasks: tuple[str, ...]
    model: ModelSpec
    """The model as the audit runs it: with the plan's variant (else the run's), in that variant's image."""

    @property
    def name(self) -> str:
        return batch_name(self.plan.model, self.plan.mode, self.plan.variant)

    def arguments(self) -> list[str]:
        """``milebench audit batch`` arguments past ``--run`` and ``--root``."""
        plan = self.plan
        return [
            *("--model", plan.model),
            *(arg for task in self.tasks for arg in ("--task", task)),
            *("--mode", plan.mode.value),
            *(("--variant", plan.variant) if plan.variant is not None else ()),
            *("--batch-sizes", ",".join(str(size) for size in plan.batch_sizes)),
            *("--repeats", str(plan.repeats)),
            *("--tie-margin", repr(plan.tie_margin)),
            *("--scorer", plan.scorer),
            *("--seed", str(plan.seed)),
        ]


@dataclass(frozen=True)
class DriftJob:
    plan: DriftAuditPlan
    run_b: RunSpec
    tasks_a: tuple[str, ...]
    tasks_b: tuple[str, ...]

    @property
    def model_b(self) -> str:
        return self.plan.model_b or self.plan.model_a

    @property
    def name(self) -> str:
        return drift_name(self.plan.model_a, self.model_b, self.plan.mode, self.plan.run_b)

    def arguments(self) -> list[str]:
        """``milebench audit drift`` arguments past ``--run`` and ``--root``."""
        plan = self.plan
        return [
            *("--model-a", plan.model_a),
            *("--model-b", self.model_b),
            *(("--run-b", plan.run_b) if plan.run_b is not None else ()),
            *("--mode", plan.mode.value),
            *("--scorer", plan.scorer),
            *("--resamples", str(plan.resamples)),
            *("--seed", str(plan.seed)),
        ]


@dataclass(frozen=True)
class AuditJobs:
    batch: tuple[BatchJob, ...] = ()
    drift: tuple[DriftJob, ...] = ()

    @property
    def names(self) -> list[str]:
        return [job.name for job in self.batch] + [job.name for job in self.drift]

    def files(self, paths: RunPaths) -> list[Path]:
        """Every audit JSON the run's report renders."""
        return [paths.audit(name) for name in self.names]


def audit_jobs(specs: Specs, run: RunSpec) -> AuditJobs:
    """The run's audits as jobs; a spec error naming the run file and each bad field."""
    if run.audit is None:
        return AuditJobs()
    problems: list[tuple[str, str]] = []
    batch = []
    for i, plan in enumerate(run.audit.batch):
        available = tuple(mode_tasks(specs, run)[plan.mode])
        chosen = available if plan.tasks == "all" else tuple(plan.tasks)
        problems += [
            (f"audit.batch.{i}.tasks.{j}", f"task {task!r} has no {plan.mode.value} set")
            for j, task in enumerate(chosen)
            if task not in available
        ]
        problems += scorer_problems(f"audit.batch.{i}", plan.scorer)
        batch.append(BatchJob(plan, chosen, audited_model(specs, run, plan)))
    drift = []
    for i, found in enumerate(run.audit.drift):
        run_b = run if found.run_b is None else specs.run(found.run_b)
        problems += scorer_problems(f"audit.drift.{i}", found.scorer)
        tasks_a, tasks_b = mode_tasks(specs, run)[found.mode], mode_tasks(specs, run_b)[found.mode]
        drift.append(DriftJob(found, run_b, tuple(tasks_a), tuple(tasks_b)))
    jobs = AuditJobs(tuple(batch), tuple(drift))
    names = jobs.names
    problems += [
        ("audit", f"two audits write {name}") for name in sorted(set(names)) if names.count(name) > 1
    ]
    if problems:
        raise SpecError(specs.root / "runs" / f"{run.name}.yaml", problems)
    return jobs


def audited_model(specs: Specs, run: RunSpec, plan: BatchAuditPlan) -> ModelSpec:
    """The plan's model with the variant it audits: its own ``variant``, else the one the run selects."""
    if plan.variant is None:
        return for_run(specs.models[plan.model], run)
    chosen = run.model_copy(update={"execution": {**run.execution, plan.model: plan.variant}})
    return for_run(specs.models[plan.model], chosen)


def scorer_problems(field: str, scorer: str) -> list[tuple[str, str]]:
    if scorer in scorer_names():
        return []
    return [(f"{field}.scorer", f"unknown scorer {scorer!r} (known: {', '.join(scorer_names())})")]
