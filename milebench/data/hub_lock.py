"""``lock-data``: pin the hub dataset to a commit and record each archive's size and LFS sha256."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Protocol

from huggingface_hub import HfApi

from milebench.data.errors import FetchError
from milebench.data.lock import ArchiveEntry, DataLock, dump_lock
from milebench.hub import hub_errors
from milebench.io import atomic_write_text

log = logging.getLogger(__name__)

ARCHIVE = re.compile(r"^MileBench_part(\d+)\.tar\.gz$")


class DatasetInfoApi(Protocol):
    """The one hub call the lock needs (``HfApi`` satisfies it; tests pass a fake)."""

    def dataset_info(
        self, repo_id: str, *, revision: str | None = None, files_metadata: bool = False
    ) -> Any: ...


def resolve_hub_lock(repo_id: str, revision: str, api: DatasetInfoApi | None = None) -> DataLock:
    """Resolve ``revision`` (branch, tag or sha) to a commit and list the archives found there."""
    hub = api if api is not None else HfApi()
    try:
        info = hub.dataset_info(repo_id, revision=revision, files_metadata=True)
    except hub_errors() as err:
        raise FetchError(f"cannot read dataset {repo_id} at {revision!r}: {err}") from err
    where = f"dataset {repo_id} at {revision!r} (commit {info.sha})"
    parts = [(int(m.group(1)), s) for s in info.siblings or () if (m := ARCHIVE.match(s.rfilename))]
    if not parts:
        raise FetchError(f"{where}: no MileBench_part*.tar.gz archives")
    parts.sort(key=lambda part: part[0])
    return DataLock(
        repo_id=repo_id,
        revision=info.sha,
        note=f"resolved from revision {revision!r} by `milebench lock-data`",
        archives=tuple(_entry(s, where) for _, s in parts),
    )


def _entry(sibling: Any, where: str) -> ArchiveEntry:
    lfs = sibling.lfs
    if lfs is None:
        raise FetchError(f"{where}: {sibling.rfilename} has no LFS metadata, so no sha256 to pin")
    if sibling.size is not None and sibling.size != lfs.size:
        raise FetchError(f"{where}: {sibling.rfilename} size {sibling.size} != LFS size {lfs.size}")
    return ArchiveEntry(name=sibling.rfilename, size=lfs.size, sha256=lfs.sha256)


def write_hub_lock(repo_id: str, revision: str, out: Path, api: DatasetInfoApi | None = None) -> DataLock:
    """Resolve the lock and write it atomically to ``out``."""
    lock = resolve_hub_lock(repo_id, revision, api)
    atomic_write_text(out, dump_lock(lock))
    log.info("wrote %s: %s at %s, %d archives", out, repo_id, lock.revision, len(lock.archives))
    return lock
