"""What each job asks a scheduler for: GPUs, memory, threads and wall time per model kind.

Snakemake passes these to its executor (local cores, SLURM ``--gpus``/``--mem``/``--time``, Kubernetes
requests), so one table decides the footprint of every infer job, whatever the profile.
"""

from __future__ import annotations

import math
import re

from pydantic import Field

from milebench.spec.base import Spec
from milebench.spec.model import ApiModel, BuiltinModel, ModelSpec, TinyWeights

UNKNOWN_SIZE_MEM_MB = 32_000
HOST_OVERHEAD_MB = 8_192
BYTES_PER_PARAM = 2
"""Half precision: a 7B model needs about 14 GB of host memory while its weights load."""


class JobResources(Spec):
    gpu: int = Field(ge=0, description="GPUs (0: CPU only).")
    mem_mb: int = Field(gt=0)
    threads: int = Field(ge=1)
    runtime: int = Field(gt=0, description="Wall-time limit in minutes.")


def params_billions(size: str | None) -> float | None:
    """``"7B"`` -> 7.0, ``"13.5B"`` -> 13.5; None for an unknown or unusual size."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*B\s*", size or "")
    return float(match.group(1)) if match else None


def weights_mem_mb(model: ModelSpec) -> int:
    billions = params_billions(model.size)
    if billions is None:
        return UNKNOWN_SIZE_MEM_MB
    return math.ceil(billions * BYTES_PER_PARAM * 1024) + HOST_OVERHEAD_MB


def infer_resources(model: ModelSpec) -> JobResources:
    """One (model, task, mode) inference job: baselines and tiny models on a CPU, checkpoints (hub or
    external weights) on one GPU."""
    weights = model.weights
    if isinstance(weights, BuiltinModel):
        return JobResources(gpu=0, mem_mb=1_000, threads=1, runtime=10)
    if isinstance(weights, ApiModel):
        return JobResources(gpu=0, mem_mb=2_000, threads=1, runtime=360)
    if isinstance(weights, TinyWeights):
        # One thread: a tiny model gains nothing from a second, and two jobs side by side finish sooner.
        return JobResources(gpu=0, mem_mb=4_000, threads=1, runtime=30)
    return JobResources(gpu=1, mem_mb=weights_mem_mb(model), threads=4, runtime=480)
