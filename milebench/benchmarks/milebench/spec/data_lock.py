"""The data lock: which archives make up a data source, with their sizes and sha256 digests."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field

from milebench.spec.base import Spec, SpecError, load_spec
from milebench.spec.pinned_file import ArchiveEntry

UNRESOLVED = "not resolved; run `milebench lock-data` where the hub is reachable"


class DataLock(Spec):
    """Pins a data source; ``null`` entries are unresolved and make a fetch refuse to start."""

    repo_id: str | None = None
    revision: str | None = None
    note: str | None = None
    archives: tuple[ArchiveEntry, ...] = Field(min_length=1)

    def unresolved(self) -> list[tuple[str, str]]:
        """Fields still null, as (field path, message) pairs for a SpecError."""
        problems = [
            (f"archives.{i}.{key}", UNRESOLVED)
            for i, entry in enumerate(self.archives)
            for key in ("size", "sha256")
            if getattr(entry, key) is None
        ]
        if self.repo_id is not None and self.revision is None:
            problems.append(("revision", UNRESOLVED))
        return problems


def load_lock(path: Path, require_complete: bool = True) -> DataLock:
    lock = load_spec(path, DataLock)
    if require_complete and (problems := lock.unresolved()):
        raise SpecError(path, problems)
    return lock


def dump_lock(lock: DataLock) -> str:
    return yaml.safe_dump(lock.model_dump(mode="json"), sort_keys=False)
