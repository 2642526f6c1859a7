"""Provenance: the run's manifests (what data was fetched, from where, with which checksums), flattened.

Whatever JSON manifest the earlier stages wrote under ``<out>/data/`` is shown as it is, key by key,
so a new manifest appears in the report without a template change. The manifests of the infer and
score jobs follow, condensed: each distinct environment once, then one line per job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milebench.io import canonical_json
from milebench.paths import RunPaths
from milebench.provenance import Environment, JobProvenance, read_provenance


@dataclass(frozen=True)
class Manifest:
    path: str
    entries: list[tuple[str, str]]
    """(dotted key, value) pairs in the file's order."""


def flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested JSON as (``a.b[0].c``, scalar) pairs; scalars rendered as JSON (null, true, 3, text)."""
    if isinstance(value, dict):
        if not value:
            return [(prefix, "{}")]
        return [pair for k, v in value.items() for pair in flatten(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(value, list):
        if not value:
            return [(prefix, "[]")]
        return [pair for i, v in enumerate(value) for pair in flatten(v, f"{prefix}[{i}]")]
    return [(prefix, value if isinstance(value, str) else json.dumps(value))]


def read_manifest(path: Path) -> Manifest:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON: {err}") from None
    return Manifest(str(path), flatten(data))


def manifests(paths: RunPaths) -> list[Manifest]:
    """Every JSON manifest under the run's data folder, fetch manifest first, then the jobs' manifests."""
    folder = paths.fetch_manifest.parent
    found = sorted(folder.glob("*.json"), key=lambda p: (p != paths.fetch_manifest, p.name))
    return [read_manifest(p) for p in found] + job_manifests(paths)


def job_manifest_files(paths: RunPaths) -> list[Path]:
    """Every infer and score job's manifest, in a stable order."""
    return sorted(
        p for stage in ("predictions", "scores") for p in (paths.out / stage).glob("*/*/*.provenance.json")
    )


def _environment_key(env: Environment) -> str:
    return canonical_json(env.model_dump(mode="json"))


def _job_line(job: JobProvenance, env_number: int) -> str:
    dirty = {True: " (dirty)", False: "", None: " (dirty: unknown)"}[job.kit.dirty]
    seconds = (job.finished_at - job.started_at).total_seconds()
    data = "no fetch manifest" if job.data is None else f"data {job.data.kind} {job.data.revision or '-'}"
    imported = "" if job.predictions_from is None else f"; predictions from {job.predictions_from}"
    promptless = "; no prompt rebuilt (task JSON alone)" if job.prompt_rebuilt is False else ""
    return (
        f"commit {job.kit.commit[:12]}{dirty}; environment {env_number}; host {job.host}; "
        f"{job.started_at.isoformat()} + {seconds:.1f} s; {data}; weights {job.weights_revision}; "
        f"seeds {job.seeds}{imported}{promptless}"
    )


def job_manifests(paths: RunPaths) -> list[Manifest]:
    """The jobs' manifests condensed: each distinct environment once (image, packages, torch/GPU),
    then one line per job naming its environment, commit, host, times, data and weights."""
    files = job_manifest_files(paths)
    if not files:
        return []
    jobs = [read_provenance(p) for p in files]
    environments: dict[str, tuple[int, Environment, int]] = {}
    numbers = []
    for job in jobs:
        key = _environment_key(job.environment)
        number, env, count = environments.get(key, (len(environments) + 1, job.environment, 0))
        environments[key] = (number, env, count + 1)
        numbers.append(number)
    found = [
        Manifest(
            f"job environment {number} ({count} job{'s' if count != 1 else ''})",
            flatten(env.model_dump(mode="json")),
        )
        for number, env, count in environments.values()
    ]
    lines = [
        (f"{job.stage} {job.model}/{job.mode}/{job.task}", _job_line(job, number))
        for job, number in zip(jobs, numbers, strict=True)
    ]
    found.append(Manifest(f"{paths.out}/{{predictions,scores}}/**/*.provenance.json", lines))
    return found
