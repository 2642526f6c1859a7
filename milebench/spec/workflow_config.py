"""The Snakefile's ``--config`` keys, validated before anything is planned: a mistyped key
(``runs=paper``, ``limits=5``) would otherwise be ignored and the default run planned in its place."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import Field, model_validator

from milebench.spec.base import Spec, SpecError, validate_mapping
from milebench.spec.deployment import IMAGE_REGISTRY, MOVED, Deployment, DockerJobs
from milebench.spec.folder import DEFAULT_SPECS

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
    deployment: Deployment = Deployment.LOCAL
    """Where jobs run (MileBench): the host's Python, each model family's Docker image, or Snakemake's
    container support (run with ``--software-deployment-method apptainer``)."""
    docker_jobs: DockerJobs = DockerJobs.INFER
    """Deployment docker: infer runs each model in its family's image and the other stages on the host;
    all runs every job in an image (the stages in the kit's, a tiny model's weights in its family's)."""
    image_registry: str | None = Field(default=None, pattern=IMAGE_REGISTRY)
    """Deployment apptainer: the Apptainer URI prefix the family images are pushed under
    (``milebench image uri`` prints each); null: local SIF files results/images/<family>.sif."""

    @model_validator(mode="after")
    def _docker_jobs_need_docker(self) -> WorkflowConfig:
        if self.docker_jobs is DockerJobs.ALL and self.deployment is not Deployment.DOCKER:
            raise ValueError(
                f"docker_jobs=all runs jobs under deployment=docker, not {self.deployment.value}"
            )
        return self


def workflow_config(config: Mapping[str, object]) -> WorkflowConfig:
    """``config`` validated: an unknown key is refused by name, with the keys there are."""
    known = WorkflowConfig.model_fields
    unknown = sorted(str(key) for key in config if key not in known)
    if unknown:
        keys = ", ".join(known)
        raise SpecError(SOURCE, [(key, f"unknown key; the workflow reads {keys}") for key in unknown])
    return validate_mapping(SOURCE, dict(config), WorkflowConfig)


def moved_settings(run: Spec, path: Path) -> SpecError | None:
    """Why a run spec that still says where its jobs run cannot be planned: the workflow's config says it
    now, and a spec's ``runtime: docker`` silently run on the host would be a surprise. None without any."""
    stated = {field: getattr(run, field) for field in MOVED if getattr(run, field) is not None}
    if not stated:
        return None
    problems = [
        (
            field,
            f"moved out of the run spec: run with `--config {MOVED[field]}={value}` (or a profile's "
            f"config:) and remove it here",
        )
        for field, value in stated.items()
    ]
    return SpecError(path, problems)
