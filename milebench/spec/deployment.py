"""Where a run's jobs run: a choice of the workflow (``--config deployment=...`` or a profile's ``config:``),
not of the run spec, whose fields are the science; the same run gives the same numbers wherever it runs."""

from __future__ import annotations

from enum import StrEnum


class Deployment(StrEnum):
    """Where jobs run: the host's Python, the model family's Docker image (Docker SDK), or Snakemake's own
    container support (Apptainer, images pulled from ``image_registry``; HPC)."""

    LOCAL = "local"
    DOCKER = "docker"
    APPTAINER = "apptainer"


class DockerJobs(StrEnum):
    """Which jobs deployment docker runs in images: inference only (each model in its family's image, the
    other stages on the host), or every job (the other stages in the kit image, a tiny model's weights in
    its family's)."""

    INFER = "infer"
    ALL = "all"


IMAGE_REGISTRY = r"^(docker|oras|library|shub)://\S+[^/]$"
"""An Apptainer URI prefix the family images are pushed under (``docker://ghcr.io/<org>/milebench``)."""

MOVED = {"runtime": "deployment", "docker_jobs": "docker_jobs", "image_registry": "image_registry"}
"""The run spec fields that chose where jobs run, and the ``--config`` key each moved to."""
