"""A bundle's manifest as every command reads it: bounded and validated (``manifest.parse_manifest``),
then the names its benchmark reads from its paths checked by that benchmark's hooks, so nothing built
from a name can be anything but one."""

from __future__ import annotations

from pathlib import Path

from milebench.archive.hooks import hooks_of
from milebench.archive.manifest import MANIFEST, Manifest, RefusedBundle, parse_manifest


def read_manifest(bundle: Path) -> Manifest:
    """The manifest of ``bundle``; a BundleError (exit status 2) says why it is refused."""
    manifest = parse_manifest(bundle)
    path = bundle / MANIFEST
    try:
        hooks_of(manifest.benchmark, path).check_manifest(manifest)
    except ValueError as err:
        raise RefusedBundle(f"{path}: not a bundle manifest: {err}") from None
    return manifest
