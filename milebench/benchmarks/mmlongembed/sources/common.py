"""What every published-format loader shares: reading its files, checking a record's fields, and the
output of a model-assisted step (query audit, rewrite, translation) handed in as a file.

A loader turns a source's own files into the kit's task input records (``task_inputs``), so every
later step (counting, confinement of pictures to the input's folder, pools) is the kit format's. An
error names the file, the record and the field and exits 2, as a refused spec does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from milebench.benchmarks.mmlongembed.task_inputs import InputRecord
from milebench.benchmarks.mmlongembed.task_kinds import Task
from milebench.io import UnreadableText, read_utf8
from milebench.record_files import RecordError
from milebench.spec.base import Spec, describe_errors

M = TypeVar("M", bound=BaseModel)


Loader = Callable[[Path, Path | None], Sequence[tuple[str, InputRecord]]]
"""(input path, the model-assisted step's output or None) -> each record with where it is."""


@dataclass(frozen=True)
class PublishedSource:
    """A source as a run spec names it (``real_tasks[].source``), declared in its loader's module."""

    name: str
    task: Task
    load: Loader


class StepLine(Spec):
    """A line of a model-assisted step's output, by the source's record id."""

    id: str


S = TypeVar("S", bound=StepLine)


class SourceError(RecordError):
    """A published-format file refused as given (the file, the record and the field named)."""

    exit_status = 2


def read_text(path: Path, what: str) -> str:
    try:
        return read_utf8(path)
    except UnreadableText as err:
        raise SourceError(str(err)) from None
    except OSError as err:
        raise SourceError(f"{path}: {what} cannot be read: {err}") from None


def read_json(path: Path, what: str) -> Any:
    """A whole-file JSON document (HotpotQA, ActivityNet Captions, MMLongBench-Doc, GovReport)."""
    try:
        return json.loads(read_text(path, what))
    except ValueError as err:
        raise SourceError(f"{path}: {what} is not JSON: {err}") from None
    except RecursionError:
        raise SourceError(f"{path}: {what} is nested too deep to read") from None


def read_jsonl(path: Path, what: str) -> list[tuple[str, Any]]:
    """Each non-empty line's JSON value with where it is (``file: line N``)."""
    rows = []
    for number, line in enumerate(read_text(path, what).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            rows.append((where, json.loads(line)))
        except ValueError as err:
            raise SourceError(f"{where}: not JSON: {err}") from None
        except RecursionError:
            raise SourceError(f"{where}: nested too deep to read") from None
    return rows


def record(raw: Any, model: type[M], where: str) -> M:
    """``raw`` checked against a source's record model; the error names every bad field."""
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise SourceError(f"{where}: {describe_errors(err)}") from None


def records(
    rows: Sequence[tuple[str, Any]], model: type[M], name: Callable[[Any], str]
) -> list[tuple[str, M]]:
    """Each row checked, its place named with the source's own record id where it has one."""
    out = []
    for where, raw in rows:
        label = name(raw) if isinstance(raw, dict) else ""
        named = f"{where} ({label})" if label else where
        out.append((named, record(raw, model, named)))
    return out


def step_outputs(
    path: Path | None, model: type[S], step: str, required: bool, spec_field: str
) -> dict[str, S]:
    """A model-assisted step's output (JSONL, one ``id`` a line) keyed by id; ``required``: the source
    cannot be built without it (the step writes what the source lacks)."""
    if path is None:
        if required:
            raise SourceError(f"{spec_field}: this source needs the output of its {step} (a JSONL file)")
        return {}
    out: dict[str, S] = {}
    for where, row in records(read_jsonl(path, f"{step} output"), model, lambda r: f"id {r.get('id')}"):
        key = row.id
        if key in out:
            raise SourceError(f"{where}: id {key!r} repeats an earlier line")
        out[key] = row
    return out


def needed(outputs: Mapping[str, S], key: str, path: Path | None, where: str) -> S:
    """The step output for ``key``; its absence names both files."""
    found = outputs.get(key)
    if found is None:
        raise SourceError(f"{where}: no line with id {key!r} in {path}")
    return found
