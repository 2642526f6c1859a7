"""``lock-data``: pin the hub dataset to a commit and record each archive's size and LFS sha256."""

from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path
from typing import Any, Protocol

from huggingface_hub import HfApi

from milebench.benchmarks.milebench.spec.data_lock import DataLock, dump_lock
from milebench.data.errors import FetchError
from milebench.hub import hub_error_text, hub_errors
from milebench.io import atomic_write_text
from milebench.spec.pinned_file import ArchiveEntry

log = logging.getLogger(__name__)

ARCHIVE = re.compile(r"^MileBench_part(\d+)\.tar\.gz$")


class DatasetApi(Protocol):
    """The two hub calls the lock needs (``HfApi`` satisfies them; tests pass a fake)."""

    def dataset_info(self, repo_id: str, *, revision: str | None = None) -> Any: ...

    def list_repo_tree(
        self, repo_id: str, *, revision: str | None = None, repo_type: str | None = None
    ) -> Any: ...


def resolve_hub_lock(repo_id: str, revision: str, api: DatasetApi | None = None) -> DataLock:
    """Resolve ``revision`` (branch, tag or sha) to a commit and list the archives found there.

    The sizes and sha256 digests come from the file tree at that commit (each large file's LFS entry):
    the tree listing carries them on the hub and on mirrors alike, where a repository's file list
    (``dataset_info(files_metadata=True)``) may name the files only.
    """
    hub = api if api is not None else HfApi()
    try:
        info = hub.dataset_info(repo_id, revision=revision)
        where = f"dataset {repo_id} at {revision!r} (commit {info.sha})"
        files = list(hub.list_repo_tree(repo_id, revision=info.sha, repo_type="dataset"))
    except hub_errors() as err:
        raise FetchError(f"cannot read dataset {repo_id} at {revision!r}: {hub_error_text(err)}") from err
    parts = [(int(m.group(1)), f) for f in files if (m := ARCHIVE.match(f.path))]
    if not parts:
        raise FetchError(f"{where}: no MileBench_part*.tar.gz archives")
    parts.sort(key=lambda part: part[0])
    return DataLock(
        repo_id=repo_id,
        revision=info.sha,
        note=f"resolved from revision {revision!r} by `milebench lock-data`",
        archives=tuple(_entry(f, where) for _, f in parts),
    )


def _entry(file: Any, where: str) -> ArchiveEntry:
    lfs = getattr(file, "lfs", None)  # a folder of the tree has none
    if lfs is None:
        raise FetchError(f"{where}: {file.path} has no LFS metadata, so no sha256 to pin")
    if file.size is not None and file.size != lfs.size:
        raise FetchError(f"{where}: {file.path} size {file.size} != LFS size {lfs.size}")
    return ArchiveEntry(name=file.path, size=lfs.size, sha256=lfs.sha256)


def write_hub_lock(repo_id: str, revision: str, out: Path, api: DatasetApi | None = None) -> DataLock:
    """Resolve the lock and write it atomically to ``out``."""
    lock = resolve_hub_lock(repo_id, revision, api)
    atomic_write_text(out, dump_lock(lock))
    log.info("wrote %s: %s at %s, %d archives", out, repo_id, lock.revision, len(lock.archives))
    return lock


def lock(args: argparse.Namespace) -> int:
    """The ``lock-data`` handler: a failed resolution is one logged line and exit 1."""
    try:
        write_hub_lock(args.repo_id, args.revision, args.out)
    except FetchError as err:
        log.error("%s", err)
        return 1
    return 0
