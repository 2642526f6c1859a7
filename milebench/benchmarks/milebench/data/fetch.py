"""Fetch a run's data: resolve the source, download, verify every archive, extract, write the manifest.

Every archive is verified before any is extracted, and the manifest is written last, so its presence
means the whole data set is verified and in place; a failure anywhere leaves no manifest. An archive
that fails verification, or matches the lock but is refused by extraction, is quarantined.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from huggingface_hub import is_offline_mode

from milebench.benchmarks.milebench.data.extract import (
    MARKERS,
    ExtractLimits,
    RefusedArchiveError,
    extract_archive,
    is_extracted,
    marker_path,
)
from milebench.benchmarks.milebench.data.sources import ResolvedSource, resolve_source
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.data.download import DownloadError, RetryPolicy, download
from milebench.data.verify import VerificationError, quarantine, verify_archive
from milebench.io import atomic_write_json
from milebench.spec.pinned_file import QUARANTINE, ArchiveEntry

log = logging.getLogger(__name__)

TIME_KEYS = ("started", "finished")
DEFAULT_RETRY = RetryPolicy()
DEFAULT_LIMITS = ExtractLimits()


def fetch_run(
    specs: Specs,
    run: RunSpec,
    paths: RunPaths,
    *,
    retry: RetryPolicy = DEFAULT_RETRY,
    limits: ExtractLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """Bring ``paths.data_root`` in line with ``run.data``; returns the manifest."""
    started = _now()
    source = resolve_source(specs, run, paths)
    body = _manifest_body(source, paths)
    if source.local_tree is not None:
        _link_local(source.local_tree, paths)
    else:
        _fetch_archives(source, paths, retry, limits)
    paths.extract_markers.mkdir(parents=True, exist_ok=True)  # an output of the fetch job, even when empty
    return _finish(paths, body, started)


def _manifest_body(source: ResolvedSource, paths: RunPaths) -> dict[str, Any]:
    """The manifest without its times: what a re-run compares to decide there is nothing to do."""
    return {
        "source": source.describe,
        "archives": [
            {"name": e.name, "size": e.size, "sha256": e.sha256, "url": url} for e, url in source.archives
        ],
        "data_root": str(paths.relative(paths.data_root)),
    }


def _finish(paths: RunPaths, body: dict[str, Any], started: str) -> dict[str, Any]:
    previous = _read_manifest(paths.fetch_manifest)
    if previous is not None and {k: v for k, v in previous.items() if k not in TIME_KEYS} == body:
        log.info("data already fetched and verified (%s); nothing to do", paths.fetch_manifest)
        return previous
    manifest = {**body, "started": started, "finished": _now()}
    atomic_write_json(paths.fetch_manifest, manifest)
    log.info("data ready in %s; manifest %s", paths.data_root, paths.fetch_manifest)
    return manifest


def _fetch_archives(
    source: ResolvedSource, paths: RunPaths, retry: RetryPolicy, limits: ExtractLimits
) -> None:
    data_dir = paths.data_root.parent
    _discard_foreign_tree(
        paths, {marker_path(data_dir, e.name, str(e.sha256)).name for e, _ in source.archives}
    )
    pending = [(e, url) for e, url in source.archives if not is_extracted(data_dir, e.name, str(e.sha256))]
    if not pending:
        return
    _discard_manifest(paths)
    log.info("%d of %d archives to fetch", len(pending), len(source.archives))
    hub = source.describe["kind"] == "hub"
    for entry, url in pending:
        _download_verified(entry, url, paths, source.auth, retry, hub)
    for entry, _ in pending:
        _extract(entry, paths, data_dir, limits)


def _download_verified(
    entry: ArchiveEntry, url: str, paths: RunPaths, auth: bool, retry: RetryPolicy, hub: bool
) -> None:
    """Reuse an earlier download when it still matches the lock, else (re)download and verify; from the
    hub only while it may be reached (``HF_HUB_OFFLINE`` unset), as every other hub call of the kit."""
    dest = paths.downloads / entry.name
    quarantine_dir = paths.downloads / QUARANTINE
    if dest.is_file():
        try:
            verify_archive(dest, entry, quarantine_dir)
            return
        except VerificationError as err:
            log.warning("%s; downloading it again", err)
    if hub and is_offline_mode():
        raise DownloadError(
            f"{entry.name}: no verified copy in {paths.downloads} and HF_HUB_OFFLINE is set: fetch it once "
            "where the hub is reachable"
        )
    download(url, dest, size=entry.size, auth=auth, retry=retry)
    verify_archive(dest, entry, quarantine_dir)


def _extract(entry: ArchiveEntry, paths: RunPaths, data_dir: Path, limits: ExtractLimits) -> None:
    """Extract one verified archive; one that extraction refuses is quarantined like a mismatch."""
    archive = paths.downloads / entry.name
    try:
        extract_archive(archive, entry.name, str(entry.sha256), data_dir, limits)
    except RefusedArchiveError as err:
        moved = quarantine(archive, paths.downloads / QUARANTINE)
        raise RefusedArchiveError(
            f"{err}\narchive {entry.name} matches the lock but was refused; it was moved to {moved}"
        ) from err


def _link_local(tree: Path, paths: RunPaths) -> None:
    """Point ``data_root`` at an extracted tree that lives elsewhere; validation is a later stage."""
    root = paths.data_root
    if root.is_symlink() and Path(os.readlink(root)) == tree:
        return
    _discard_manifest(paths)
    _remove_tree(paths)
    root.parent.mkdir(parents=True, exist_ok=True)
    root.symlink_to(tree, target_is_directory=True)
    log.info("linked %s -> %s", root, tree)


def _discard_foreign_tree(paths: RunPaths, wanted_markers: set[str]) -> None:
    """Drop a tree extracted from other archives (or linked elsewhere), so data sets never mix."""
    root = paths.data_root
    markers_dir = root.parent / MARKERS
    present = {p.name for p in markers_dir.glob("*.json")} if markers_dir.is_dir() else set()
    foreign = root.is_symlink() or bool(present - wanted_markers) or (root.exists() and not present)
    if foreign:
        log.warning("%s holds other data than this source; removing it", root)
        paths.fetch_manifest.unlink(missing_ok=True)
        _remove_tree(paths)


def _discard_manifest(paths: RunPaths) -> None:
    """Remove the manifest before changing the tree: it must only ever describe a finished fetch."""
    if paths.fetch_manifest.exists():
        log.info("removing the manifest %s until this fetch completes", paths.fetch_manifest)
        paths.fetch_manifest.unlink()


def _remove_tree(paths: RunPaths) -> None:
    root = paths.data_root
    if root.is_symlink():
        root.unlink()
    elif root.exists():
        shutil.rmtree(root)
    shutil.rmtree(root.parent / MARKERS, ignore_errors=True)


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
