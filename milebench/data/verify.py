"""Size and sha256 check of a downloaded archive; a mismatch is quarantined, never extracted."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path

from milebench.data.errors import FetchError
from milebench.io import sha256_file
from milebench.spec.pinned_file import ArchiveEntry

log = logging.getLogger(__name__)


class VerificationError(FetchError):
    """An archive does not match its lock entry."""


def quarantine(path: Path, quarantine_dir: Path) -> Path:
    """Move a bad file aside under a UTC timestamp, so it can be inspected and is never reused."""
    quarantine_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    target = quarantine_dir / f"{path.name}.{stamp}"
    os.replace(path, target)
    return target


def verify_archive(path: Path, entry: ArchiveEntry, quarantine_dir: Path, what: str = "archive") -> None:
    """Check ``path`` against ``entry``; on mismatch quarantine it and raise VerificationError naming it
    as ``what`` (an archive, a weight file)."""
    size = path.stat().st_size
    digest = sha256_file(path)
    if size == entry.size and digest == entry.sha256:
        log.info("verified %s (%d bytes, sha256 %s)", entry.name, size, digest)
        return
    moved = quarantine(path, quarantine_dir)
    raise VerificationError(
        f"{what} {entry.name} failed verification: expected size {entry.size} sha256 {entry.sha256}, "
        f"got size {size} sha256 {digest}; the file was moved to {moved}"
    )
