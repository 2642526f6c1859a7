"""Expand a run spec into its jobs: the one place that decides which (model, task, mode) cells exist."""

from __future__ import annotations

import logging
from typing import NamedTuple

from milebench.benchmarks.milebench.preprocess.regime import Regime, run_regimes
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.spec.model import BuiltinModel, ModelSpec

log = logging.getLogger(__name__)


class TaskMode(NamedTuple):
    task: str
    mode: Mode


class Cell(NamedTuple):
    model: str
    task: str
    mode: Mode


def applies(task: TaskSpec, mode: Mode) -> bool:
    """The adversarial mode exists only for tasks with an adversarial set (not the diagnostic ones)."""
    return mode is not Mode.ADVERSARIAL or task.has_adversarial


def task_modes(specs: Specs, run: RunSpec) -> list[TaskMode]:
    """Every (task, mode) pair the run preprocesses."""
    return [TaskMode(t.name, m) for m in run.modes for t in specs.run_tasks(run) if applies(t, m)]


def cells(specs: Specs, run: RunSpec) -> list[Cell]:
    """Every (model, task, mode) cell the run infers and scores."""
    return [Cell(model, tm.task, tm.mode) for model in run.models for tm in task_modes(specs, run)]


def job_per_cell(model: ModelSpec) -> bool:
    """Whether the model's infer jobs are one per cell: the built-in baselines only, whose answers cost
    nothing, so their cells run side by side. Every other model has one job per (model, mode) answering
    every task of the mode, each cell with its own journal: a model that loads weights (tiny, hub or
    external) pays its imports and load once, an API model its process start and pre-flight request once
    instead of once per task."""
    return isinstance(model.weights, BuiltinModel)


def mode_tasks(specs: Specs, run: RunSpec) -> dict[Mode, list[str]]:
    """Per mode, the tasks the run answers in it: what one (model, mode) job answers."""
    tasks: dict[Mode, list[str]] = {mode: [] for mode in run.modes}
    for tm in task_modes(specs, run):
        tasks[tm.mode].append(tm.task)
    return tasks


class Prepare(NamedTuple):
    """One preprocess job: a task in a mode for one input regime, shared by the models that read it."""

    task: str
    mode: Mode
    regime: str


def regimes(specs: Specs, run: RunSpec) -> dict[Mode, dict[str, tuple[Regime, tuple[str, ...]]]]:
    """Per mode: regime id -> (regime, the models that read it)."""
    return {mode: run_regimes(specs, run, mode) for mode in run.modes}


def model_regimes(specs: Specs, run: RunSpec) -> dict[tuple[str, Mode], str]:
    """(model, mode) -> the regime id whose prepared file the model reads."""
    return {
        (model, mode): regime_id
        for mode, by_id in regimes(specs, run).items()
        for regime_id, (_, models) in by_id.items()
        for model in models
    }


def prepare_jobs(specs: Specs, run: RunSpec) -> list[Prepare]:
    """Every preprocess job of the run: one per (task, mode, regime), however many models share it."""
    by_mode = regimes(specs, run)
    return [
        Prepare(tm.task, tm.mode, regime_id)
        for tm in task_modes(specs, run)
        for regime_id in by_mode[tm.mode]
    ]
