"""The bundle's manifest: sha256 and size of every file, what produced it and which badges it backs.

``MANIFEST.json`` lists every file of the bundle but itself; its own sha256 is the bundle's id, so a
bundle is content-addressed: two bundles with the same id hold the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field, ValidationError

from milebench.archive.badges import BACKS, Badge, Role
from milebench.errors import KitError
from milebench.io import atomic_write_text, sha256_file
from milebench.spec.base import Spec, describe_errors

MANIFEST = "MANIFEST.json"
FORMAT = "milebench-bundle/1"


class BundleError(KitError, RuntimeError):
    """A run that cannot be archived, or a bundle that cannot be read; the message says which file."""


class Entry(Spec):
    path: str = Field(description="POSIX path inside the bundle.")
    sha256: str
    size: int = Field(ge=0)
    role: Role
    produced_by: str = Field(description="The command or step that wrote the file.")
    backs: tuple[Badge, ...] = Field(description="The badges whose claims this file is evidence for.")


class ImageEntry(Spec):
    family: str
    image_id: str = Field(description="The engine's id (sha256 of the image config) the run recorded.")
    file: str = Field(description="The `docker save` archive in the bundle.")
    sbom: str | None = Field(description="The image's CycloneDX SBOM in the bundle.")


class Manifest(Spec):
    format: str = FORMAT
    run: str
    specs: str = Field(description="The specs folder the run used, inside the bundle.")
    root: str = Field(description="The run's layout (results/<run>/, reports/<run>/) inside the bundle.")
    kit_commits: tuple[str, ...] = Field(description="Every kit commit the run's jobs ran at.")
    dirty: bool = Field(description="Some job ran from a checkout with uncommitted changes.")
    images: tuple[ImageEntry, ...]
    with_data: bool
    with_weights: bool
    files: tuple[Entry, ...]


def entry(bundle: Path, path: str, role: Role, produced_by: str) -> Entry:
    """The manifest line of one file already in the bundle."""
    target = bundle / path
    return Entry(
        path=path,
        sha256=sha256_file(target),
        size=target.stat().st_size,
        role=role,
        produced_by=produced_by,
        backs=BACKS[role],
    )


def write_manifest(bundle: Path, manifest: Manifest) -> str:
    """Write ``MANIFEST.json`` (files sorted by path) and return the bundle's id."""
    ordered = manifest.model_copy(update={"files": tuple(sorted(manifest.files, key=lambda e: e.path))})
    atomic_write_text(bundle / MANIFEST, json.dumps(ordered.model_dump(mode="json"), indent=1) + "\n")
    return bundle_id(bundle)


def bundle_id(bundle: Path) -> str:
    return sha256_file(bundle / MANIFEST)


def read_manifest(bundle: Path) -> Manifest:
    path = bundle / MANIFEST
    if not bundle.is_dir():
        raise BundleError(f"{bundle}: not a bundle folder")
    try:
        return Manifest.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise BundleError(f"{path}: missing: not a bundle made by `milebench archive`") from None
    except ValidationError as err:
        raise BundleError(f"{path}: not a bundle manifest: {describe_errors(err)}") from None


def bundle_files(bundle: Path) -> set[str]:
    """Every regular file under the bundle but the manifest, as POSIX paths."""
    return {
        p.relative_to(bundle).as_posix()
        for p in bundle.rglob("*")
        if (p.is_file() or p.is_symlink()) and p.relative_to(bundle).as_posix() != MANIFEST
    }


def check_files(bundle: Path, manifest: Manifest) -> list[str]:
    """One line per file that is missing, altered (size or sha256) or not in the manifest."""
    problems = []
    for e in manifest.files:
        path = bundle / e.path
        if path.is_symlink() or not path.is_file():
            problems.append(f"{e.path}: missing ({e.role}, {e.size} bytes in the manifest)")
            continue
        size = path.stat().st_size
        digest = sha256_file(path) if size == e.size else None
        if digest != e.sha256:
            found = f"sha256 {digest[:12]}" if digest else f"{size} bytes"
            problems.append(
                f"{e.path}: altered ({e.role}; manifest: sha256 {e.sha256[:12]}, {e.size} bytes; "
                f"bundle: {found})"
            )
    listed = {e.path for e in manifest.files}
    problems += [f"{p}: not in the manifest" for p in sorted(bundle_files(bundle) - listed)]
    return problems
