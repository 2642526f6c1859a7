"""Spec of the real tasks a run builds from files the user has (the benchmark's own data is not public).

One entry per dataset: its task, a JSONL file in the task's input format (``task_inputs``), the length
pools and the candidates per query (C/Q). The paper keeps C/Q the same across a task's length pools;
the kit keeps it the same across all datasets of a task too, so a task's pools are comparable.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import Field, StrictInt

from milebench.spec.base import Spec

REAL_TASK_BINS = (8192, 16384, 32768)


class Task(StrEnum):
    MULTI_SOURCE_REASONING = "multi-source-reasoning"
    LOGICAL_SUMMARIZATION = "logical-summarization"
    TEMPORAL_SUMMARIZATION = "temporal-summarization"


REAL_TASKS = frozenset(t.value for t in Task)
"""A real-task query's ``family`` in the track's records (``task_pools``)."""


class RealTask(Spec):
    """One dataset of a real task, built into Easy and Hard pools at each length."""

    task: Task
    dataset: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="Unique within the run.")
    path: str = Field(description="The task's JSONL input; relative to the specs folder unless absolute.")
    bins: tuple[Annotated[StrictInt, Field(ge=64)], ...] = Field(
        default=REAL_TASK_BINS, min_length=1, description="Length pools: every candidate is padded to each."
    )
    candidates: StrictInt = Field(
        ge=2, description="Candidates per query (C/Q) in every Easy and Hard pool at every length."
    )
    padding: str | None = Field(
        default=None,
        description="Unrelated plain text to pad and replace with (relative to the specs folder unless"
        " absolute); default: the public-domain prose bundled with the kit.",
    )
    seed: StrictInt = 0

    def input_path(self, specs_root: Path) -> Path:
        return Path(self.path) if Path(self.path).is_absolute() else Path(specs_root) / self.path

    def padding_path(self, specs_root: Path) -> Path | None:
        if self.padding is None:
            return None
        return Path(self.padding) if Path(self.padding).is_absolute() else Path(specs_root) / self.padding
