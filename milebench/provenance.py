"""The environment behind an output, as any benchmark's provenance records it: the kit's commit, the image
or the installed packages, torch/CUDA/GPU when the job loaded torch, and a model's weights revision."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field

from milebench.spec.base import Spec
from milebench.spec.model import ApiModel, BuiltinModel, HubWeights, ModelSpec, TinyWeights

log = logging.getLogger(__name__)

KIT_ROOT = Path(__file__).resolve().parents[1]
IMAGE_ID_VAR = "MILEBENCH_IMAGE_ID"
COMMIT_VAR = "MILEBENCH_KIT_COMMIT"
DIRTY_VAR = "MILEBENCH_KIT_DIRTY"
"""Set by the Docker runtime: inside an image the kit has no git checkout, so the host's facts are passed."""
NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")
UNKNOWN = "unknown"
NOT_LOADED: Final = "not loaded"


class KitVersion(Spec):
    commit: str = Field(description='git HEAD of the kit checkout, or "unknown" outside a checkout.')
    dirty: bool | None = Field(description="Tracked files differ from the commit; null when unknown.")


class TorchInfo(Spec):
    version: str
    cuda: str | None = Field(description="CUDA version torch was built with.")
    cuda_available: bool
    gpus: tuple[str, ...] = ()
    driver: str | None = Field(description="The NVIDIA driver line of /proc, when present.")


class Environment(Spec):
    image_id: str | None = Field(description="The Docker image the job ran in (docker runtime).")
    python: str
    platform: str
    packages: dict[str, str] = Field(description="Every installed distribution and its version.")
    torch: TorchInfo | Literal["not loaded"]


def utc_now() -> datetime:
    return datetime.now(UTC)


def provenance_path(output: Path) -> Path:
    """The manifest beside an output: ``<output>.provenance.json``."""
    return output.with_name(output.name + ".provenance.json")


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(KIT_ROOT), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def kit_version(environ: Mapping[str, str] = os.environ) -> KitVersion:
    """The host's commit when passed in (containers), else this checkout's; "unknown" without git."""
    if COMMIT_VAR in environ:
        dirty = environ.get(DIRTY_VAR)
        return KitVersion(commit=environ[COMMIT_VAR], dirty=None if dirty is None else dirty == "1")
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return KitVersion(commit=UNKNOWN, dirty=None)
    status = _git("status", "--porcelain", "--untracked-files=no")
    return KitVersion(commit=commit, dirty=None if status is None else bool(status))


@cache
def packages() -> dict[str, str]:
    """Installed distributions as ``pip freeze`` would list them, read in-process, once per process
    (reading them costs a third of a second; a command writing many manifests pays it once)."""
    found = {
        (dist.metadata["Name"] or "").lower(): dist.version for dist in importlib.metadata.distributions()
    }
    return dict(sorted((name, version) for name, version in found.items() if name))


def torch_info() -> TorchInfo | Literal["not loaded"]:
    """Only when the job already imported torch: provenance never pays for loading it."""
    torch: Any = sys.modules.get("torch")
    if torch is None:
        return NOT_LOADED
    available = bool(torch.cuda.is_available())
    gpus = tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())) if available else ()
    driver = NVIDIA_DRIVER.read_text(encoding="utf-8").splitlines()[0] if NVIDIA_DRIVER.is_file() else None
    return TorchInfo(
        version=str(torch.__version__),
        cuda=torch.version.cuda,
        cuda_available=available,
        gpus=gpus,
        driver=driver,
    )


def environment(environ: Mapping[str, str] = os.environ) -> Environment:
    return Environment(
        image_id=environ.get(IMAGE_ID_VAR),
        python=sys.version.split()[0],
        platform=platform.platform(),
        packages=packages(),
        torch=torch_info(),
    )


def weights_revision(model: ModelSpec) -> str:
    """The pinned hub commit, or what stands in for one; "unpinned" when loading follows a branch."""
    weights = model.weights
    if isinstance(weights, HubWeights):
        return weights.revision or "unpinned"
    if isinstance(weights, TinyWeights):
        return f"tiny {weights.family} seed {weights.seed}"
    if isinstance(weights, ApiModel):
        return f"api {weights.provider} {weights.model_id}"
    if isinstance(weights, BuiltinModel):
        return "builtin"
    return "unpinned"
