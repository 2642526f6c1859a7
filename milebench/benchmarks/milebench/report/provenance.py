"""Provenance: where the numbers came from, as a reader looks for it, with the full record one click away.

Jobs are grouped by environment: the installed software (image, Python, platform, packages). Each
environment gets one row of what a reader checks first: its jobs, the kit commit, the image, Python,
what its jobs saw of torch/CUDA/GPU (a score job never loads torch, and nodes of one image may differ
in GPUs, so this is listed per group of jobs), transformers, the weights revisions and the data
revision, and its package count; a fact that differs between environments is marked, and so are the
packages whose versions differ. The full package lists, one line per infer and score job of the run's
cells, and the fetch manifest (shown key by key, so a new field appears without a template change) are
kept for the folded part of the section (``<details>`` in HTML, an appendix in LaTeX). Only the run's
own files are read (the report job's declared inputs), never a folder listing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import Cell
from milebench.benchmarks.milebench.provenance import DataRevision, JobProvenance, read_provenance
from milebench.io import canonical_json
from milebench.provenance import Environment, TorchInfo

FACTS: tuple[tuple[str, str], ...] = (
    ("jobs", "Jobs"),
    ("kit", "Kit commit"),
    ("image", "Image"),
    ("python", "Python"),
    ("torch", "torch / CUDA / GPU"),
    ("transformers", "transformers"),
    ("weights", "Weights"),
    ("data", "Data"),
    ("packages", "Packages"),
)
"""(key, header) of the facts shown per environment, in order."""
UNKNOWN = object()
"""A compared fact no job of an environment showed (torch when none loaded it): it differs from nothing."""


@dataclass(frozen=True)
class Manifest:
    path: str
    entries: list[tuple[str, str]]
    """(dotted key, value) pairs in the file's order."""


@dataclass(frozen=True)
class EnvironmentSummary:
    label: str
    image: str | None
    platform: str
    facts: dict[str, str]
    """Fact key (``FACTS``) -> the value as shown."""
    differs: frozenset[str]
    """Facts whose value differs from another environment's."""
    packages: list[tuple[str, str]]
    """Every installed distribution and its version."""
    package_differences: list[str]
    """``name version`` of each package installed at another version (or not at all) elsewhere."""


@dataclass(frozen=True)
class Provenance:
    environments: list[EnvironmentSummary] = field(default_factory=list)
    data: list[Manifest] = field(default_factory=list)
    """The data manifests (fetch manifest first), key by key."""
    jobs: Manifest | None = None
    """One line per infer and score job."""

    @property
    def empty(self) -> bool:
        return not self.environments and not self.data

    @property
    def facts(self) -> tuple[tuple[str, str], ...]:
        return FACTS


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


def read_manifest(path: Path, shown: Path) -> Manifest:
    """The JSON manifest at ``path``, named ``shown``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON: {err}") from None
    return Manifest(str(shown), flatten(data))


def data_manifests(paths: RunPaths) -> list[Manifest]:
    """The fetch manifest, when the data was fetched."""
    found = paths.fetch_manifest
    return [read_manifest(found, paths.relative(found))] if found.exists() else []


def job_manifest_files(paths: RunPaths, cells: Iterable[Cell]) -> list[Path]:
    """The infer and score manifests of the run's cells that exist, in a stable order."""
    candidates = (p for c in cells for p in (paths.infer_provenance(*c), paths.score_provenance(*c)))
    return sorted(p for p in candidates if p.exists())


def _environment_key(env: Environment) -> str:
    """What makes an environment: the installed software, not whether a job loaded torch."""
    return canonical_json(env.model_dump(mode="json", exclude={"torch"}))


def _commit(job: JobProvenance) -> str:
    dirty = {True: " (dirty)", False: "", None: " (dirty: unknown)"}[job.kit.dirty]
    return f"{job.kit.commit[:12]}{dirty}"


def _data(data: DataRevision | None) -> str:
    if data is None:
        return "no fetch manifest"
    if data.kind == "task-json":
        return "task JSON only"
    return data.kind if data.revision is None else f"{data.kind} {data.revision}"


def _job_line(job: JobProvenance, env_number: int) -> str:
    seconds = (job.finished_at - job.started_at).total_seconds()
    imported = "" if job.predictions_from is None else f"; predictions from {job.predictions_from}"
    promptless = "; no prompt rebuilt (task JSON alone)" if job.prompt_rebuilt is False else ""
    return (
        f"commit {_commit(job)}; environment {env_number}; torch {_torch(job.environment.torch)}; "
        f"host {job.host}; "
        f"{job.started_at.isoformat()} + {seconds:.1f} s; {_data(job.data)}; weights {job.weights_revision}; "
        f"seeds {job.seeds}{imported}{promptless}"
    )


def _torch(torch: TorchInfo | str) -> str:
    if not isinstance(torch, TorchInfo):
        return torch
    gpus = ", ".join(torch.gpus) if torch.gpus else "no GPU"
    driver = f" ({torch.driver})" if torch.driver else ""
    return f"{torch.version}, CUDA {torch.cuda or 'none'}, {gpus}{driver}"


def _listing(values: list[str]) -> str:
    """Distinct values in first-seen order, joined."""
    return ", ".join(dict.fromkeys(values))


def _counted(values: list[str]) -> str:
    """The one value, or each distinct value with the number of jobs that had it."""
    counts = Counter(values)
    if len(counts) == 1:
        return values[0]
    return "; ".join(f"{value} ({n} job{'s' if n != 1 else ''})" for value, n in counts.most_common())


def _facts(env: Environment, jobs: list[JobProvenance]) -> dict[str, str]:
    stages = Counter(job.stage for job in jobs)
    return {
        "jobs": f"{len(jobs)} ({', '.join(f'{stage} {n}' for stage, n in sorted(stages.items()))})",
        "kit": _listing([_commit(job) for job in jobs]),
        "image": "host" if env.image_id is None else env.image_id.removeprefix("sha256:")[:12],
        "python": env.python,
        "torch": _counted([_torch(job.environment.torch) for job in jobs]),
        "transformers": env.packages.get("transformers", "not installed"),
        "weights": _listing(sorted(f"{job.model} {job.weights_revision}" for job in jobs)),
        "data": _listing([_data(job.data) for job in jobs]),
        "packages": str(len(env.packages)),
    }


def _compared(env: Environment, jobs: list[JobProvenance]) -> dict[str, object]:
    """The facts that must agree between environments for a run to be one setup; jobs, weights and
    packages are left out (each environment runs other jobs; packages are compared one by one)."""
    torch = frozenset(_torch(j.environment.torch) for j in jobs if isinstance(j.environment.torch, TorchInfo))
    return {
        "kit": frozenset(_commit(job) for job in jobs),
        "image": env.image_id,
        "python": env.python,
        "torch": torch or UNKNOWN,
        "transformers": env.packages.get("transformers"),
        "data": frozenset(_data(job.data) for job in jobs),
    }


def summarise_environments(
    envs: list[Environment], jobs: list[list[JobProvenance]]
) -> list[EnvironmentSummary]:
    """One summary per environment (``jobs[i]`` ran in ``envs[i]``), differences marked."""
    facts = [_facts(env, env_jobs) for env, env_jobs in zip(envs, jobs, strict=True)]
    compared = [_compared(env, env_jobs) for env, env_jobs in zip(envs, jobs, strict=True)]
    names = sorted({name for env in envs for name in env.packages})
    varying = {n for n in names if len({env.packages.get(n) for env in envs}) > 1}
    summaries = []
    for number, (env, found, mine) in enumerate(zip(envs, facts, compared, strict=True), start=1):
        differs = frozenset(
            key
            for key, value in mine.items()
            if any(UNKNOWN not in (value, other[key]) and other[key] != value for other in compared)
        )
        changed = [f"{n} {env.packages.get(n, 'absent')}" for n in names if n in varying]
        if changed:
            found = {**found, "packages": f"{found['packages']}; {len(changed)} differ: {', '.join(changed)}"}
            differs |= {"packages"}
        summaries.append(
            EnvironmentSummary(
                label=f"job environment {number}",
                image=env.image_id,
                platform=env.platform,
                facts=found,
                differs=differs,
                packages=sorted(env.packages.items()),
                package_differences=changed,
            )
        )
    return summaries


def run_provenance(paths: RunPaths, cells: Iterable[Cell]) -> Provenance:
    """The run's data manifest and the jobs of its cells, grouped by environment."""
    files = job_manifest_files(paths, cells)
    jobs = [read_provenance(p) for p in files]
    numbers: dict[str, int] = {}
    envs: list[Environment] = []
    grouped: list[list[JobProvenance]] = []
    lines = []
    for job in jobs:
        key = _environment_key(job.environment)
        if key not in numbers:
            numbers[key] = len(envs) + 1
            envs.append(job.environment)
            grouped.append([])
        grouped[numbers[key] - 1].append(job)
        lines.append((f"{job.stage} {job.model}/{job.mode}/{job.task}", _job_line(job, numbers[key])))
    shown = f"{paths.relative(paths.out)}/{{predictions,scores}}/**/*.provenance.json"
    listing = Manifest(shown, lines) if lines else None
    return Provenance(summarise_environments(envs, grouped), data_manifests(paths), listing)
