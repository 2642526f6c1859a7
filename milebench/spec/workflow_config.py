"""The Snakefile's ``--config`` keys, validated before anything is planned: a mistyped key
(``runs=paper``, ``limits=5``) would otherwise be ignored and the default run planned in its place."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import Field

from milebench.spec.base import Spec, SpecError, validate_mapping
from milebench.spec.registry import DEFAULT_SPECS

SOURCE = "--config"


class WorkflowConfig(Spec):
    """Every key the workflow reads, with its default."""

    run: str = "smoke"
    specs: Path = DEFAULT_SPECS
    image_base: str | None = None
    image_ca_bundle: str | None = None
    archive_options: str = ""
    limit: int | None = Field(default=None, ge=1)
    """At most this many samples per task (the run spec's ``limit``, replaced)."""


def workflow_config(config: Mapping[str, object]) -> WorkflowConfig:
    """``config`` validated: an unknown key is refused by name, with the keys there are."""
    known = WorkflowConfig.model_fields
    unknown = sorted(str(key) for key in config if key not in known)
    if unknown:
        keys = ", ".join(known)
        raise SpecError(SOURCE, [(key, f"unknown key; the workflow reads {keys}") for key in unknown])
    return validate_mapping(SOURCE, dict(config), WorkflowConfig)
