"""Provenance: the run's manifests (what data was fetched, from where, with which checksums), flattened.

Whatever JSON manifest the earlier stages wrote under ``<out>/data/`` is shown as it is, key by key,
so a new manifest appears in the report without a template change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milebench.paths import RunPaths


@dataclass(frozen=True)
class Manifest:
    path: str
    entries: list[tuple[str, str]]
    """(dotted key, value) pairs in the file's order."""


def flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested JSON as (``a.b[0].c``, scalar) pairs; scalars rendered as JSON (null, true, 3, text)."""
    if isinstance(value, dict):
        if not value:
            return [(prefix, "{}")]
        return [pair for k, v in value.items() for pair in flatten(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(value, list):
        if not value:
            return [(prefix, "[]")]
        return [pair for i, v in enumerate(value) for pair in flatten(v, f"{prefix}[{i}]")]
    return [(prefix, value if isinstance(value, str) else json.dumps(value))]


def read_manifest(path: Path) -> Manifest:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON: {err}") from None
    return Manifest(str(path), flatten(data))


def manifests(paths: RunPaths) -> list[Manifest]:
    """Every JSON manifest under the run's data folder, fetch manifest first."""
    folder = paths.fetch_manifest.parent
    found = sorted(folder.glob("*.json"), key=lambda p: (p != paths.fetch_manifest, p.name))
    return [read_manifest(p) for p in found]
