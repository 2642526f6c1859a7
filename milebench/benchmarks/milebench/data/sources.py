"""Turn a run spec's data source into the archives to fetch, their URLs and the lock that pins them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.data_lock import DataLock, load_lock
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import (
    FixtureSource,
    HubSource,
    LocalSource,
    MirrorSource,
    RunSpec,
)
from milebench.data.download import hub_dataset_url, hub_url
from milebench.spec.base import SpecError
from milebench.spec.pinned_file import ArchiveEntry
from milebench.stage_inputs import command, require

FIXTURE_LOCK = "milebench.lock.yaml"


@dataclass(frozen=True)
class ResolvedSource:
    """Everything fetch needs from a source; ``describe`` is what the manifest records about it."""

    archives: tuple[tuple[ArchiveEntry, str], ...]
    describe: dict[str, Any]
    auth: bool = False
    local_tree: Path | None = None


def run_spec_path(specs: Specs, run: RunSpec) -> Path:
    """The file a run spec was loaded from (the registry requires name == file stem)."""
    return specs.file(f"runs/{run.name}.yaml")


def resolve_source(specs: Specs, run: RunSpec, paths: RunPaths) -> ResolvedSource:
    """Resolve ``run.data``; relative mirror and local paths are taken from the working folder."""
    source = run.data
    if isinstance(source, LocalSource):
        return _local(specs, run, source)
    if isinstance(source, HubSource):
        return _hub(specs.file(source.lock))
    if isinstance(source, MirrorSource):
        return _mirror(source.url, specs.file(source.lock), {"kind": "mirror", "url": source.url})
    if isinstance(source, FixtureSource):
        lock_path = require(paths.mirror / FIXTURE_LOCK, "fixture lock", command("fixture", out=paths.mirror))
        return _mirror(str(paths.mirror), lock_path, {"kind": "fixture", "path": str(paths.mirror)})
    raise TypeError(f"unknown data source {source!r}")


def _local(specs: Specs, run: RunSpec, source: LocalSource) -> ResolvedSource:
    tree = Path(source.path)
    if not tree.is_dir():
        raise SpecError(run_spec_path(specs, run), [("data.path", f"no such folder: {tree}")])
    tree = tree.resolve()
    return ResolvedSource(archives=(), describe={"kind": "local", "path": str(tree)}, local_tree=tree)


def _hub(lock_path: Path) -> ResolvedSource:
    lock = load_lock(require(lock_path, "data lock", command("lock-data", out=lock_path)))
    if lock.repo_id is None or lock.revision is None:
        raise SpecError(lock_path, [("repo_id", "a hub source needs the dataset repo id")])
    archives = tuple((e, hub_url(lock.repo_id, lock.revision, e.name)) for e in lock.archives)
    describe = {
        "kind": "hub",
        "repo_id": lock.repo_id,
        "revision": lock.revision,
        "url": hub_dataset_url(lock.repo_id),
        "lock": str(lock_path),
    }
    return ResolvedSource(archives=archives, describe=describe, auth=True)


def _mirror(base: str, lock_path: Path, describe: dict[str, Any]) -> ResolvedSource:
    lock: DataLock = load_lock(lock_path)
    archives = tuple((e, _join(base, e.name)) for e in lock.archives)
    full = {**describe, "repo_id": lock.repo_id, "revision": lock.revision, "lock": str(lock_path)}
    return ResolvedSource(archives=archives, describe=full)


def _join(base: str, name: str) -> str:
    if "://" in base:
        return f"{base.rstrip('/')}/{name}"
    return str(Path(base) / name)
