"""Expand a run spec into its jobs: the one place that decides which (model, task, mode) cells exist."""

from __future__ import annotations

from typing import NamedTuple

from milebench.spec.registry import Specs
from milebench.spec.run import Mode, RunSpec
from milebench.spec.task import TaskSpec


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
