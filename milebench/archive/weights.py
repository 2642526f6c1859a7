"""Hub weights from the local Hugging Face cache, at the pinned revision, checked file by file.

The cache stores each file of a snapshot as a link to a blob named by the hub's hash of it: the sha256
for files in large-file storage, the git blob sha1 for the others. A file whose bytes do not give its
blob's name is corrupt, and is refused rather than bundled.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path, PurePosixPath

from milebench.archive.manifest import BundleError
from milebench.io import CHUNK, sha256_file

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def git_blob_sha1(path: Path) -> str:
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def blob_matches(path: Path) -> bool:
    """The file's bytes hash to the name of the blob the cache stored them under."""
    name = path.resolve().name
    if re.fullmatch(r"[0-9a-f]{64}", name):
        return sha256_file(path) == name
    if re.fullmatch(r"[0-9a-f]{40}", name):
        return git_blob_sha1(path) == name
    return False


def hub_snapshot(
    cache: Path | None, repo_id: str, revisions: set[str], model: str
) -> list[tuple[PurePosixPath, Path]]:
    """(path under the cache root, file) of every file of the model's snapshot at its one pinned commit."""
    pinned = sorted(r for r in revisions if COMMIT.match(r))
    if len(pinned) != 1 or len(revisions) != 1:
        found = ", ".join(sorted(revisions)) or "no infer job"
        raise BundleError(
            f"model {model}: weights of {repo_id} ran at {found}: only weights pinned to one hub commit "
            "(milebench lock-weights) can be bundled and checked"
        )
    if cache is None:
        raise BundleError(f"model {model}: no Hugging Face cache on this machine (HF_HOME) holds {repo_id}")
    folder = PurePosixPath("hub", f"models--{repo_id.replace('/', '--')}", "snapshots", pinned[0])
    snapshot = cache / folder
    if not snapshot.is_dir():
        raise BundleError(f"model {model}: {snapshot} missing: download {repo_id} at {pinned[0]} first")
    files = []
    for path in sorted(p for p in snapshot.rglob("*") if p.is_file()):
        if not blob_matches(path):
            raise BundleError(f"{path}: its bytes do not match the hub's hash {path.resolve().name}")
        files.append((folder / path.relative_to(snapshot).as_posix(), path))
    return files
