"""Load the tasks, models and runs of a specs folder once and check the references between them (the
folder and its overlay of the shipped one: ``milebench.spec.folder``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.spec.base import SpecError
from milebench.spec.folder import DEFAULT_SPECS, load_kind, overlay_base, resolve_file
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import for_run, variant_problem
from milebench.spec.names import by_name
from milebench.spec.run_limit import run_limit
from milebench.spec.weights_lock import WEIGHTS_LOCK, pin_weights


@dataclass(frozen=True)
class Specs:
    """All specs of a kit checkout, keyed by name; ``root`` resolves relative paths inside them."""

    root: Path
    tasks: dict[str, TaskSpec]
    models: dict[str, ModelSpec]
    runs: dict[str, RunSpec]
    base: Path | None = None
    """The shipped folder ``root`` overlays; None when ``root`` is whole."""

    def file(self, relative: str | Path) -> Path:
        """Where the file at ``relative`` (a lock, a paper spec) comes from: the overlay's own, else
        the shipped one."""
        return resolve_file(self.root, self.base, relative)

    def run(self, name: str) -> RunSpec:
        """The run ``name``, with the command line's limit where one was given (``limit_runs``)."""
        run = by_name(self.runs, name, "run", self.root / "runs")
        if (limit := run_limit()) is None:
            return run
        return RunSpec.model_validate(run.model_dump(mode="json") | {"limit": limit})

    def model(self, name: str) -> ModelSpec:
        return by_name(self.models, name, "model", self.root / "models")

    def task(self, name: str) -> TaskSpec:
        return by_name(self.tasks, name, "task", self.root / "tasks")

    def loaded_model(self, run: RunSpec, name: str) -> ModelSpec:
        """The model as a job of ``run`` loads it: the run's execution variant and, for a hub model whose
        spec names no revision, the weights lock's commit."""
        return for_run(pin_weights(self.model(name), self.lock_root()), run)

    def lock_root(self) -> Path:
        """The folder whose weights lock is used: ``root``, or the shipped one it overlays when it has
        none of its own."""
        return self.file(WEIGHTS_LOCK).parent.parent

    def run_tasks(self, run: RunSpec) -> list[TaskSpec]:
        names = list(self.tasks) if run.tasks == "all" else list(run.tasks)
        return [self.tasks[n] for n in names]

    def run_models(self, run: RunSpec) -> list[ModelSpec]:
        """The run's models as it runs them: with the execution variant it selects for each."""
        return [for_run(self.models[n], run) for n in run.models]


def _audit_problems(
    run: RunSpec,
    runs: Mapping[str, RunSpec],
    models: Mapping[str, tuple[Path, ModelSpec]],
    tasks: Mapping[str, tuple[Path, TaskSpec]],
) -> list[tuple[str, str]]:
    """The names a run's audits use that the run (or the other run they read) does not have."""
    if run.audit is None:
        return []
    problems = []
    for i, batch in enumerate(run.audit.batch):
        field = f"audit.batch.{i}"
        if batch.model not in run.models:
            problems.append((f"{field}.model", f"model {batch.model!r} is not in this run"))
        elif batch.variant is not None and batch.model in models:
            problem = variant_problem(models[batch.model][1], batch.variant)
            problems += [(f"{field}.variant", problem)] if problem else []
        if batch.mode not in run.modes:
            problems.append((f"{field}.mode", f"mode {batch.mode.value!r} is not one of this run's"))
        if batch.tasks != "all":
            chosen = set(tasks) if run.tasks == "all" else set(run.tasks)
            problems += [
                (f"{field}.tasks.{j}", f"task {t!r} is not in this run")
                for j, t in enumerate(batch.tasks)
                if t not in chosen
            ]
    for i, drift in enumerate(run.audit.drift):
        field = f"audit.drift.{i}"
        other = run if drift.run_b is None else runs.get(drift.run_b)
        model_b = drift.model_b or drift.model_a
        if drift.model_a not in run.models:
            problems.append((f"{field}.model_a", f"model {drift.model_a!r} is not in this run"))
        if other is None:
            problems.append(
                (f"{field}.run_b", f"no run spec {drift.run_b!r}; known: {', '.join(sorted(runs))}")
            )
            continue
        if model_b not in other.models:
            problems.append((f"{field}.model_b", f"model {model_b!r} is not in run {other.name!r}"))
        for side in (run, other):
            if drift.mode not in side.modes:
                problems.append(
                    (f"{field}.mode", f"mode {drift.mode.value!r} is not one of run {side.name!r}'s")
                )
        if other is run and model_b == drift.model_a:
            problems.append((field, "drift needs two sides: set model_b or run_b"))
    return problems


def load_specs(root: Path = DEFAULT_SPECS) -> Specs:
    """Load and cross-check the tasks, models and runs under ``root``."""
    root = Path(root)
    if not root.is_dir():
        raise SpecError(root, [("<folder>", "no such specs folder")])
    base = overlay_base(root)
    tasks = load_kind(root, "tasks", TaskSpec, base)
    models = load_kind(root, "models", ModelSpec, base)
    runs = load_kind(root, "runs", RunSpec, base)

    for path, run in runs.values():
        problems = [
            (f"models.{i}", f"unknown model {m!r}") for i, m in enumerate(run.models) if m not in models
        ]
        for model, variant in run.execution.items():
            problem = (
                f"model {model!r} is not in this run"
                if model not in run.models or model not in models
                else variant_problem(models[model][1], variant)
            )
            if problem:
                problems.append((f"execution.{model}", problem))
        if run.tasks != "all":
            problems += [
                (f"tasks.{i}", f"unknown task {t!r}") for i, t in enumerate(run.tasks) if t not in tasks
            ]
        problems += _audit_problems(run, {n: r for n, (_, r) in runs.items()}, models, tasks)
        if problems:
            raise SpecError(path, problems)
    return Specs(
        root=root,
        tasks={k: v for k, (_, v) in tasks.items()},
        models={k: v for k, (_, v) in models.items()},
        runs={k: v for k, (_, v) in runs.items()},
        base=base,
    )
