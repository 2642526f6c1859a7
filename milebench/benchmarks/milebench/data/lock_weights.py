"""``lock-weights``: resolve each hub model's revision to a commit, and each url weight file without a size
and sha256 to what its URL serves, once, where the hub and the URLs are reachable."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import yaml

from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.data.download import RetryPolicy
from milebench.data.errors import FetchError
from milebench.errors import KitError
from milebench.hub import hub_error_text, hub_errors
from milebench.io import atomic_write_text
from milebench.spec.model import ModelSpec, UrlWeights
from milebench.spec.weights_lock import WEIGHTS_LOCK, FileDigest, WeightsLock, hub_part, load_weights_lock

log = logging.getLogger(__name__)


class RevisionError(KitError, RuntimeError):
    """A model's revision could not be resolved on the hub; the message names the model and its repo."""


class ModelInfo(Protocol):
    sha: str | None


class HubApi(Protocol):
    """The one call of ``huggingface_hub.HfApi`` this needs; tests pass a stand-in."""

    def model_info(self, repo_id: str, *, revision: str | None = None) -> ModelInfo: ...


def resolve_revisions(models: Mapping[str, ModelSpec], api: HubApi, ref: str = "main") -> WeightsLock:
    """Commit of ``ref`` for every hub model that leaves its revision open in its spec."""
    revisions: dict[str, str] = {}
    for name, spec in sorted(models.items()):
        hub = hub_part(spec)
        if hub is not None and hub.revision is None:
            where = f"{name} ({hub.repo_id} at {ref!r})"
            try:
                sha = api.model_info(hub.repo_id, revision=ref).sha
            except hub_errors() as err:
                raise RevisionError(
                    f"cannot resolve model revisions on the hub: {where}: {hub_error_text(err)}"
                ) from err
            if sha is None:
                raise RevisionError(f"hub returned no commit for {hub.repo_id}@{ref} ({name})")
            log.info("%s: %s@%s -> %s", name, hub.repo_id, ref, sha)
            revisions[name] = sha
    return WeightsLock(
        note=f"Resolved from the hub ref {ref!r} by `milebench lock-weights`.", revisions=revisions
    )


def resolve_files(
    models: Mapping[str, ModelSpec],
    known: Mapping[str, Mapping[str, FileDigest]],
    cache: Path,
    retry: RetryPolicy | None = None,
) -> dict[str, dict[str, FileDigest]]:
    """Size and sha256 of every url weight file its spec leaves open: the lock's where it has them, else
    what the URL serves now (downloaded into the weights cache, which then holds the verified file)."""
    from milebench.data.weight_files import digest_of

    files: dict[str, dict[str, FileDigest]] = {}
    for name, spec in sorted(models.items()):
        if not isinstance(spec.weights, UrlWeights):
            continue
        for file in spec.weights.files:
            if file.size is not None and file.sha256 is not None:
                continue
            digest = known.get(name, {}).get(file.name)
            if digest is None:
                size, sha256 = digest_of(spec, file, cache, retry or RetryPolicy())
                digest = FileDigest(size=size, sha256=sha256)
                log.info("%s: %s -> %d bytes, sha256 %s (as served now)", name, file.url, size, sha256)
            files.setdefault(name, {})[file.name] = digest
    return files


def lock_weights(args: argparse.Namespace) -> int:
    """Pin every open hub model, or with ``--run`` that run's only, keeping the lock's other entries."""
    from huggingface_hub import HfApi

    from milebench.data.weight_files import weights_cache

    specs = load_specs(args.specs)
    out = Path(args.specs) / WEIGHTS_LOCK
    models = specs.models if args.run is None else {n: specs.model(n) for n in specs.run(args.run).models}
    current = specs.file(WEIGHTS_LOCK)  # an overlay without its own lock starts from the shipped one
    old = load_weights_lock(current) if current.exists() else None
    lock = resolve_revisions(models, HfApi(), ref=args.ref)
    try:
        files = resolve_files(models, old.files if old else {}, weights_cache())
    except FetchError as err:
        log.error("cannot resolve a weight file: %s", err)
        return 1
    if args.run is not None and old is not None:
        revisions = {n: r for n, r in old.revisions.items() if n not in models} | lock.revisions
        files = {n: f for n, f in old.files.items() if n not in models} | files
        lock = lock.model_copy(update={"revisions": dict(sorted(revisions.items()))})
    lock = lock.model_copy(update={"files": dict(sorted(files.items()))})
    atomic_write_text(out, yaml.safe_dump(lock.model_dump(mode="json"), sort_keys=False))
    log.info("wrote %d revisions to %s", len(lock.revisions), out)
    return 0
