"""Archived results against re-computed ones: judgments, task scores, aggregate, verdict cells, report
tables and predictions. Each difference is one line naming the file and where in it. An archived file
is the bundle author's bytes: one that does not parse is a BundleError naming it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from milebench.archive.manifest import BundleError
from milebench.io import read_jsonl

MAX_SHOWN = 3
"""Differences named per file; the count says how many more there are."""
HTML_TABLE = re.compile(r"<table\b.*?</table>", re.S)
TEX_TABLE = re.compile(r"\\begin\{(tabular|longtable)\}.*?\\end\{\1\}", re.S)


def json_differences(archived: Any, redone: Any, where: str = "") -> Iterator[str]:
    """Dotted paths at which two JSON values differ, with both values."""
    if isinstance(archived, dict) and isinstance(redone, dict):
        for key in sorted(set(archived) | set(redone), key=str):
            yield from json_differences(
                archived.get(key), redone.get(key), f"{where}.{key}" if where else key
            )
    elif isinstance(archived, list) and isinstance(redone, list) and len(archived) == len(redone):
        for i, (a, b) in enumerate(zip(archived, redone, strict=True)):
            yield from json_differences(a, b, f"{where}[{i}]")
    elif archived != redone:
        old, new = json.dumps(archived)[:80], json.dumps(redone)[:80]
        yield f"{where or '<root>'}: archived {old}, re-computed {new}"


def shown(name: str, differences: list[str]) -> list[str]:
    more = len(differences) - MAX_SHOWN
    lines = [f"{name}: {d}" for d in differences[:MAX_SHOWN]]
    return lines + ([f"{name}: {more} more differences"] if more > 0 else [])


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise BundleError(f"{path}: not UTF-8 text: {err}") from None


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except ValueError as err:  # a JSONDecodeError, or nesting too deep to parse
        raise BundleError(f"{path}: not JSON: {err}") from None
    except RecursionError:
        raise BundleError(f"{path}: not JSON: nested too deep") from None


def compare_json(name: str, archived: Path, redone: Path) -> list[str]:
    if not redone.is_file():
        return [f"{name}: not re-computed (the command wrote no file)"]
    return shown(name, list(json_differences(read_json(archived), read_json(redone))))


def keyed_rows(path: Path, key: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    try:
        rows = list(read_jsonl(path))
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, nested too deep
        raise BundleError(f"{path}: not JSON lines: {err}") from None
    if not all(isinstance(row, dict) for row in rows):
        raise BundleError(f"{path}: a line is not a JSON object")
    return {tuple(row.get(k) for k in key): row for row in rows}


def compare_rows(
    name: str, archived: Path, redone: Path, key: tuple[str, ...], fields: tuple[str, ...] | None = None
) -> list[str]:
    """JSONL files row by row, matched by ``key``; ``fields`` limits what must agree (all by default)."""
    if not redone.is_file():
        return [f"{name}: not re-computed (the command wrote no file)"]
    old, new = keyed_rows(archived, key), keyed_rows(redone, key)
    differences = [
        f"{'/'.join(map(str, k))}: archived, not re-computed"
        for k in sorted(old.keys() - new.keys(), key=str)
    ]
    differences += [
        f"{'/'.join(map(str, k))}: re-computed, not archived"
        for k in sorted(new.keys() - old.keys(), key=str)
    ]
    for k in sorted(old.keys() & new.keys(), key=str):
        a, b = old[k], new[k]
        if fields is not None:
            a, b = {f: a.get(f) for f in fields}, {f: b.get(f) for f in fields}
        differences += [f"{'/'.join(map(str, k))}: {d}" for d in json_differences(a, b)]
    return shown(name, differences)


def agreement(
    archived: Path, redone: Path, fields: tuple[str, ...], key: tuple[str, ...] = ("sample_id",)
) -> tuple[int, int]:
    """(rows whose ``fields`` agree, archived rows), rows matched by ``key``."""
    old, new = keyed_rows(archived, key), keyed_rows(redone, key) if redone.is_file() else {}
    same = sum(1 for k, row in old.items() if k in new and all(row.get(f) == new[k].get(f) for f in fields))
    return same, len(old)


def tables(path: Path) -> list[str]:
    text = read_text(path)
    return [m.group(0) for m in (HTML_TABLE if path.suffix == ".html" else TEX_TABLE).finditer(text)]


def compare_tables(name: str, archived: Path, redone: Path) -> tuple[int, list[str]]:
    """(tables compared, differences): every table of the report, in order."""
    if not redone.is_file():
        return 0, [f"{name}: not re-rendered (the report command wrote no file)"]
    old, new = tables(archived), tables(redone)
    if len(old) != len(new):
        return len(old), [f"{name}: {len(old)} tables archived, {len(new)} re-rendered"]
    differing = [i + 1 for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    return len(old), shown(name, [f"table {i} differs" for i in differing])
