"""Weight files distributed outside the hub (``weights: {kind: url}``): fetched into the weights cache and
used only when they match their size and sha256, under the data archives' rules: an unresolved digest
refuses to start, a download resumes and is capped at the expected size, a mismatch is quarantined (never
used, never overwritten in place), and nothing is trusted that was not verified.

The cache is ``$MILEBENCH_WEIGHTS``, else ``milebench-weights/`` in the Hugging Face cache (``$HF_HOME``,
else ``~/.cache/huggingface``), which the model images mount read-only at ``/models``; one folder per
model spec. Hashing gigabytes at every load would cost minutes, so a verified file gets a record of its
size, modification time and sha256 beside it; a file whose size or time changed since is hashed again.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from milebench.data.download import RetryPolicy, download
from milebench.data.errors import FetchError
from milebench.data.verify import VerificationError, verify_archive
from milebench.io import atomic_write_json, sha256_file
from milebench.spec.model import ModelSpec, UrlWeights, WeightFile
from milebench.spec.pinned_file import QUARANTINE

log = logging.getLogger(__name__)

DEFAULT_RETRY = RetryPolicy()
CACHE_VAR = "MILEBENCH_WEIGHTS"
CACHE_FOLDER = "milebench-weights"
VERIFIED_SUFFIX = ".verified.json"


class WeightsError(FetchError):
    """A weight file is unresolved, missing or does not match; the message names the model spec, the file
    and the command that fixes it."""


def weights_cache(environ: Mapping[str, str] = os.environ) -> Path:
    """Where url weights are kept."""
    named = environ.get(CACHE_VAR)
    if named:
        return Path(named)
    hub = environ.get("HF_HOME")
    return (Path(hub) if hub else Path.home() / ".cache" / "huggingface") / CACHE_FOLDER


def url_weights(spec: ModelSpec) -> UrlWeights:
    if not isinstance(spec.weights, UrlWeights):
        raise WeightsError(f"model spec {spec.name!r}: weights are {spec.weights.kind!r}, not url")
    return spec.weights


def model_folder(spec: ModelSpec, cache: Path) -> Path:
    return cache / spec.name


def require_resolved(spec: ModelSpec, file: WeightFile) -> None:
    """Refuse a file whose size or sha256 neither the spec nor the weights lock states."""
    if file.size is None or file.sha256 is None:
        raise WeightsError(
            f"model spec {spec.name!r}: weight file {file.name} has no size and sha256 in the spec or the "
            f"weights lock; run `milebench lock-weights` where {file.url} is reachable"
        )


def fetch_weight_files(
    spec: ModelSpec, cache: Path | None = None, retry: RetryPolicy = DEFAULT_RETRY
) -> dict[str, Path]:
    """Every file of ``spec`` in the cache and verified; an earlier download that still matches is kept."""
    folder = model_folder(spec, cache or weights_cache())
    paths = {}
    for file in url_weights(spec).files:
        require_resolved(spec, file)
        dest = folder / file.name
        if dest.is_file():
            try:
                _verify(dest, file, folder)
                paths[file.name] = dest
                continue
            except VerificationError as err:
                log.warning("%s; downloading it again", err)
        download(file.url, dest, size=file.size, retry=retry)
        _verify(dest, file, folder)
        paths[file.name] = dest
    return paths


def verified_weight_files(spec: ModelSpec, cache: Path | None = None) -> dict[str, Path]:
    """The cached files of ``spec``, each checked against its size and sha256 before use."""
    folder = model_folder(spec, cache or weights_cache())
    paths = {}
    for file in url_weights(spec).files:
        require_resolved(spec, file)
        dest = folder / file.name
        if not dest.is_file():
            raise WeightsError(
                f"model spec {spec.name!r}: weight file {dest} is missing; run "
                f"`milebench fetch-weights --model {spec.name}`"
            )
        try:
            _verify(dest, file, folder)
        except VerificationError as err:
            raise WeightsError(
                f"model spec {spec.name!r}: {err}; run `milebench fetch-weights --model {spec.name}`"
            ) from err
        paths[file.name] = dest
    return paths


def _verify(path: Path, file: WeightFile, folder: Path) -> None:
    """Size and sha256 (the record of an earlier check, while the file is unchanged since); a mismatch is
    quarantined."""
    record = path.with_name(path.name + VERIFIED_SUFFIX)
    stat = path.stat()
    seen = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": file.sha256}
    if record.is_file() and json.loads(record.read_text(encoding="utf-8")) == seen:
        return
    record.unlink(missing_ok=True)
    verify_archive(path, file, folder / QUARANTINE, what="weight file")
    atomic_write_json(record, seen)


def digest_of(spec: ModelSpec, file: WeightFile, cache: Path, retry: RetryPolicy) -> tuple[int, str]:
    """Size and sha256 of ``file`` for ``lock-weights``: of the copy already in the cache (a URL that
    serves browsers only, such as Google Drive's for large files, is downloaded by hand into it), else of
    what its URL serves now, downloaded into the cache. What is recorded is what was received: the lock
    pins it from then on."""
    dest = model_folder(spec, cache) / file.name
    if not dest.is_file():
        download(file.url, dest, retry=retry)
    return dest.stat().st_size, sha256_file(dest)
