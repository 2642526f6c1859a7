"""Job provenance: the exact environment behind one infer or score output, written beside it.

A manifest answers "where did this number come from" without trusting memory: the kit's commit, the
hashes of the specs the job read, the data revision and archive checksums, the image or the installed
packages, torch/CUDA/GPU when the job loaded torch, seeds, the weights revision, times and host.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field

from milebench.io import atomic_write_json
from milebench.spec.base import Spec
from milebench.spec.execution import Execution
from milebench.spec.model import ApiModel, BuiltinModel, HubWeights, ModelSpec, TinyWeights
from milebench.spec.model_execution import execution_of
from milebench.spec.registry import Specs, spec_hash
from milebench.spec.run import FixtureSource, RunSpec

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


class DataRevision(Spec):
    kind: str
    revision: str | None = Field(description="The hub revision, when the data came from the hub.")
    archives: dict[str, str] = Field(description="Archive name -> sha256, from the fetch manifest.")


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


class JobProvenance(Spec):
    """The manifest of one job; ``outputs`` are the files it covers."""

    stage: Literal["infer", "score"]
    run: str
    model: str
    task: str
    mode: str
    outputs: tuple[str, ...]
    kit: KitVersion
    specs: dict[str, str] = Field(description="Spec kind -> content hash (run, model, task).")
    data: DataRevision | None = Field(description="null when the run's fetch manifest is absent.")
    environment: Environment
    seeds: dict[str, int]
    weights_revision: str
    execution: Execution | None = Field(
        default=None,
        description="Infer jobs: the execution choices the model ran with, a run's variant named in "
        "applied_variant; null for scoring and for models without one (API, baselines).",
    )
    started_at: datetime
    finished_at: datetime
    host: str
    prompt_rebuilt: bool | None = Field(
        default=None,
        description="Score jobs: false when judged against the task JSON alone, no prompt rebuilt.",
    )
    predictions_from: str | None = Field(
        default=None, description="The official outputs file the predictions were imported from."
    )


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


def data_revision(fetch_manifest: Path) -> DataRevision | None:
    """What the fetch stage verified; None (with a warning) when the manifest is absent or unreadable."""
    try:
        manifest = json.loads(fetch_manifest.read_text(encoding="utf-8"))
        source = manifest["source"]
        return DataRevision(
            kind=str(source.get("kind", UNKNOWN)),
            revision=source.get("revision"),
            archives={a["name"]: a["sha256"] for a in manifest.get("archives", [])},
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("%s: no data revision for provenance: %s", fetch_manifest, err)
        return None


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


def seeds(run: RunSpec, model: ModelSpec) -> dict[str, int]:
    found = {"generation": model.generation.seed}
    if isinstance(run.data, FixtureSource):
        found["fixture"] = run.data.seed
    if isinstance(model.weights, TinyWeights):
        found["tiny_weights"] = model.weights.seed
    return found


def job_provenance(
    *,
    stage: Literal["infer", "score"],
    specs: Specs,
    run: RunSpec,
    model: ModelSpec,
    task: str,
    mode: str,
    outputs: tuple[Path, ...],
    fetch_manifest: Path,
    started_at: datetime,
    environ: Mapping[str, str] = os.environ,
    data: DataRevision | None = None,
    prompt_rebuilt: bool | None = None,
    predictions_from: Path | None = None,
) -> JobProvenance:
    """``model`` is the spec the job ran (weights pinned from the lock); spec hashes are of the files.

    ``data`` replaces the fetch manifest's revision when the job read other data (imported official
    outputs are judged against the task JSON the user points at).
    """
    return JobProvenance(
        stage=stage,
        run=run.name,
        model=model.name,
        task=task,
        mode=mode,
        outputs=tuple(str(p) for p in outputs),
        kit=kit_version(environ),
        specs={
            "run": spec_hash(run),
            "model": spec_hash(specs.models[model.name]),
            "task": spec_hash(specs.tasks[task]),
        },
        data=data if data is not None else data_revision(fetch_manifest),
        environment=environment(environ),
        seeds=seeds(run, model),
        weights_revision=weights_revision(model),
        execution=execution_of(model) if stage == "infer" else None,
        started_at=started_at,
        finished_at=utc_now(),
        host=socket.gethostname(),
        prompt_rebuilt=prompt_rebuilt,
        predictions_from=None if predictions_from is None else str(predictions_from),
    )


def write_provenance(path: Path, record: JobProvenance) -> None:
    atomic_write_json(path, record.model_dump(mode="json"))
    log.info("provenance -> %s", path)


def read_provenance(path: Path) -> JobProvenance:
    """A manifest, or a ValueError naming the file and what is wrong with it."""
    try:
        return JobProvenance.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(f"{path}: not a job provenance manifest: {err}") from None
