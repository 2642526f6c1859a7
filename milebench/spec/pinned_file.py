"""A downloaded file pinned by its size and sha256: a data archive or a weight file, in the downloads
folder beside its partial downloads and the quarantine folder."""

from __future__ import annotations

from pydantic import Field, StrictInt, field_validator

from milebench.spec.base import Spec

QUARANTINE = "quarantine"
PART_SUFFIX = ".part"


class ArchiveEntry(Spec):
    """One archive; ``name`` becomes a file in the downloads folder, so it must be a plain file name."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    size: StrictInt | None = Field(default=None, ge=0)
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @field_validator("name")
    @classmethod
    def _not_a_download_file(cls, name: str) -> str:
        """The downloads folder also holds ``<name>.part`` files and the quarantine folder."""
        if name == QUARANTINE or name.endswith(PART_SUFFIX):
            raise ValueError(f"{name!r} is reserved (the {QUARANTINE} folder and *{PART_SUFFIX} downloads)")
        return name
