"""Spec of the real tasks a run builds from files the user has (the benchmark's own data is not public).

One entry per dataset: its task, a JSONL file in the task's input format (``task_inputs``), the length
pools and the candidates per query (C/Q). The paper keeps C/Q the same across a task's length pools;
the kit keeps it the same across all datasets of a task too, so a task's pools are comparable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, StrictInt, model_validator

from milebench.benchmarks.mmlongembed.task_kinds import KIT, Task
from milebench.spec.base import Spec

REAL_TASK_BINS = (8192, 16384, 32768)


def under(specs_root: Path, name: str) -> Path:
    """A path a spec names: relative to the specs folder unless absolute."""
    return Path(name) if Path(name).is_absolute() else Path(specs_root) / name


TASK_NAMES = {
    Task.MULTI_SOURCE_REASONING: "Multi-Source Reasoning",
    Task.LOGICAL_SUMMARIZATION: "Logical Summarization",
    Task.TEMPORAL_SUMMARIZATION: "Temporal Summarization",
}
"""As the paper names them."""
REAL_TASKS = frozenset(t.value for t in Task)
"""A real-task query's ``family`` in the track's records (``task_pools``)."""


class RealTask(Spec):
    """One dataset of a real task, built into Easy and Hard pools at each length."""

    task: Task
    dataset: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="Unique within the run.")
    path: str = Field(
        description="The task's input (a file; GovReport: a folder of reports); relative to the specs"
        " folder unless absolute."
    )
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
    source: str = Field(
        default=KIT,
        description="The input's format: 'kit' (the JSONL above) or a published source's own"
        " (``sources.SOURCES``: hotpotqa, mmdocrag, govreport, mmlongbench-doc, activitynet-captions,"
        " youku-dense-caption).",
    )
    model_output: str | None = Field(
        default=None,
        description="The output of the source's model-assisted step (query audit, summary writing,"
        " translation) as a JSONL file, relative to the specs folder unless absolute; each source says"
        " whether it needs one and its lines.",
    )
    seed: StrictInt = 0

    @model_validator(mode="after")
    def _known_source(self) -> RealTask:
        if self.source == KIT:
            return self
        from milebench.benchmarks.mmlongembed.sources import SOURCES

        if self.source not in SOURCES:
            raise ValueError(f"source: unknown {self.source!r}; known: {', '.join([KIT, *SOURCES])}")
        if SOURCES[self.source][0] is not self.task:
            raise ValueError(
                f"source: {self.source} is a {SOURCES[self.source][0].value} source, not {self.task.value}"
            )
        return self

    def input_path(self, specs_root: Path) -> Path:
        return under(specs_root, self.path)

    def model_output_path(self, specs_root: Path) -> Path | None:
        return None if self.model_output is None else under(specs_root, self.model_output)

    def padding_path(self, specs_root: Path) -> Path | None:
        return None if self.padding is None else under(specs_root, self.padding)
