"""Which execution a model spec runs with: its own, its adapter's declared default, or the variant a run
selects. Apart from :mod:`milebench.spec.execution` because the model spec holds an ``Execution``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from milebench.spec.adapters import declared
from milebench.spec.execution import GENERIC, PAPER, Execution
from milebench.spec.model import ModelSpec


def execution_of(spec: ModelSpec) -> Execution | None:
    """The choices ``spec`` runs with: its own, else its adapter's defaults; None where not applicable."""
    if spec.execution is not None:
        return spec.execution
    found = declared(spec.adapter)
    return GENERIC if found is not None and found.declaration.execution == "generic" else None


def variant_problem(spec: ModelSpec, variant: str) -> str | None:
    """Why ``variant`` cannot run ``spec``; None when it can."""
    execution = execution_of(spec)
    known = [PAPER, *sorted(execution.variants)] if execution else [PAPER]
    if variant in known:
        return None
    return f"model {spec.name!r} has no execution variant {variant!r} (known: {', '.join(known)})"


class RunVariants(Protocol):
    """What a benchmark's run spec states of its models' executions: a variant by model name."""

    @property
    def execution(self) -> Mapping[str, str]: ...


def for_run(spec: ModelSpec, run: RunVariants) -> ModelSpec:
    """``spec`` with the execution variant ``run`` selects for it (checked when the specs load), in the
    image family the variant names, if any."""
    variant = run.execution.get(spec.name, PAPER)
    execution = execution_of(spec)
    if variant == PAPER or execution is None:
        return spec
    applied = execution.with_variant(variant)
    container = execution.variants[variant].container or spec.container
    return spec.model_copy(update={"execution": applied, "container": container})
