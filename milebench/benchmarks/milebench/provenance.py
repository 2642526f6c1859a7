"""MileBench's job provenance: the exact environment behind one infer or score output, written beside it.

A manifest answers "where did this number come from" without trusting memory: the kit's commit, the
hashes of the specs the job read, the data revision and archive checksums, the image or the installed
packages, torch/CUDA/GPU when the job loaded torch, seeds, the weights revision, times and host.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field

from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, RunSpec
from milebench.io import atomic_write_json
from milebench.provenance import (
    UNKNOWN,
    Environment,
    KitVersion,
    environment,
    kit_version,
    utc_now,
    weights_revision,
)
from milebench.spec.base import Spec, spec_hash
from milebench.spec.execution import Execution
from milebench.spec.model import ModelSpec, TinyWeights
from milebench.spec.model_execution import execution_of

log = logging.getLogger(__name__)


class DataRevision(Spec):
    kind: str
    revision: str | None = Field(description="The hub revision, when the data came from the hub.")
    archives: dict[str, str] = Field(description="Archive name -> sha256, from the fetch manifest.")


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
