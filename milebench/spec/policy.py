"""RunPolicy: what a run decides for each of its inference jobs, as one value.

It is decided once per job (:func:`run_policy`, from the run's settings and the model spec as the run
loads it) and handed to the adapter's constructor and to the engine, which read it from there only: no
setting is set onto an adapter after construction, and a backend that cannot carry out a policy refuses
it by name at load.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from pydantic import Field

from milebench.spec.base import Number, Spec
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import execution_of


class ContextOverflow(StrEnum):
    """What inference does with an input longer than the model's window (or with more images than it
    takes) after truncation: ``generate`` as the official code, which never checked, recording by how
    much it went over (paper); ``refuse`` fails such a sample as context_overflow without a call (the
    named strict variant)."""

    GENERATE = "generate"
    REFUSE = "refuse"


class RunPolicy(Spec):
    """The per-job settings the engine and the adapters act on; the defaults are every run spec's."""

    context_overflow: ContextOverflow = Field(
        default=ContextOverflow.GENERATE,
        description="The run's context_overflow: answer an input past the model's window (generate) or "
        "fail it as context_overflow without a call (refuse).",
    )
    stop_strings: tuple[str, ...] = Field(
        default=(), description="The stop strings of the execution the run selected for the model."
    )
    max_failure_rate: Number = Field(
        default=0.05,
        ge=0,
        le=1,
        description="The run's budget of failed samples per inference job.",
    )


DEFAULT_POLICY = RunPolicy()
"""A run spec's defaults: what a run that states none decides."""


class RunSettings(Protocol):
    """What a benchmark's run spec states of the policy."""

    @property
    def context_overflow(self) -> ContextOverflow: ...

    @property
    def max_failure_rate(self) -> float: ...


def run_policy(run: RunSettings | None, spec: ModelSpec) -> RunPolicy:
    """The policy of ``run``'s jobs of ``spec`` (the model spec as the run loads it, its execution variant
    applied); without a run, a run spec's defaults (an adapter built outside any run)."""
    execution = execution_of(spec)
    stop_strings = execution.stop_strings if execution is not None else ()
    if run is None:
        return RunPolicy(stop_strings=stop_strings)
    return RunPolicy(
        context_overflow=run.context_overflow,
        stop_strings=stop_strings,
        max_failure_rate=run.max_failure_rate,
    )
