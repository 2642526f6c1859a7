"""Shared base for every spec model and the loader that names the file and field on error."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import AllowInfNan, BaseModel, ConfigDict, Field, Strict, ValidationError
from pydantic_core import PydanticCustomError
from yaml.reader import ReaderError

from milebench.io import UnreadableText, read_utf8
from milebench.spec.safe_yaml import parse_yaml

Number = Annotated[float, Strict(), AllowInfNan(False)]
"""A finite int or float; a YAML ``true`` or ``.nan`` is a mistake, not 1.0 or a number."""


class Spec(BaseModel):
    """Immutable, strict base: an unknown key in a spec is a typo, never a silent default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def tolerance_field() -> Any:
    """A run's verdict tolerance, every benchmark's (``tolerance: Number = tolerance_field()``): ours
    within it of a published value reproduces it."""
    return Field(default=1.0, ge=0, description="Verdict tolerance in table points (x100).")


class SpecError(ValueError):
    """A spec file failed to load or validate; the message names the file and each bad field."""

    def __init__(self, path: Path | str, problems: list[tuple[str, str]]):
        self.path = Path(path)
        self.problems = problems
        lines = [f"{self.path}: {field}: {message}" for field, message in problems]
        super().__init__("\n".join(lines))


S = TypeVar("S", bound=BaseModel)


def registered(name: str, known: Iterable[str], what: str) -> str:
    """``name`` if it is among ``known`` (read when a spec loads, so an installed family counts)."""
    names = sorted(known)
    if name not in names:
        raise PydanticCustomError(
            f"unknown_{what.replace(' ', '_')}",
            "unknown {what} {name}; known: {known}",
            {"what": what, "name": repr(name), "known": ", ".join(names)},
        )
    return name


def field_path(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as a dotted field path (``models.3.name``)."""
    return ".".join(str(part) for part in loc) or "<root>"


def field_errors(err: ValidationError) -> list[tuple[str, str]]:
    """(field path, message) of each error; a list's "should have at least 1 item after validation" is
    left out when one of its items failed: the list was not empty, its item is the error."""
    errors = err.errors()

    def inside(loc: tuple[int | str, ...]) -> bool:
        return any(len(e["loc"]) > len(loc) and e["loc"][: len(loc)] == loc for e in errors)

    return [
        (field_path(e["loc"]), e["msg"])
        for e in errors
        if not (e["type"] == "too_short" and inside(e["loc"]))
    ]


def describe_errors(err: ValidationError) -> str:
    """All field errors of a validation failure on one line: ``field.path: message; ...``."""
    return "; ".join(f"{where}: {message}" for where, message in field_errors(err))


def validate_mapping(path: Path | str, data: object, model: type[S]) -> S:
    """Validate already-parsed data against ``model``, turning errors into a SpecError for ``path``."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise SpecError(path, field_errors(err)) from None


def read_text(path: Path) -> str:
    """A spec file's text; a folder, an unreadable file or non-UTF-8 bytes become a SpecError."""
    try:
        return read_utf8(path)
    except UnreadableText as err:
        raise SpecError(path, [(err.where, err.problem)]) from None
    except FileNotFoundError:
        raise SpecError(path, [("<file>", "file not found")]) from None
    except OSError as err:
        raise SpecError(path, [("<file>", f"cannot read: {err.strerror or err}")]) from None


def _yaml_problem(err: yaml.YAMLError, text: str) -> tuple[str, str]:
    """(``line N``, message) for a YAML error; a reader error only knows its character offset."""
    if isinstance(err, ReaderError):
        line = text[: err.position].count("\n") + 1
        return f"line {line}", f"invalid YAML: character #x{err.character:04x} is not allowed"
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and context_mark is not None:
        problem = f"{problem} ({context} started on line {context_mark.line + 1})"
    return (f"line {mark.line + 1}" if mark is not None else "<file>"), f"invalid YAML: {problem}"


def read_yaml(path: Path) -> object:
    """Parse a YAML spec file; any way it is unreadable becomes a SpecError naming the file and line."""
    text = read_text(path)
    try:
        return parse_yaml(text)
    except yaml.YAMLError as err:
        raise SpecError(path, [_yaml_problem(err, text)]) from None


def load_spec(path: Path, model: type[S]) -> S:
    """Load one YAML spec file into ``model``."""
    return validate_mapping(path, read_yaml(path), model)


def spec_hash(spec: Spec, exclude: frozenset[str] = frozenset()) -> str:
    """Content hash of a validated spec: a formatting-only edit of its YAML leaves it unchanged.

    ``exclude`` leaves top-level fields out, so adding a field that cannot matter keeps old hashes."""
    payload = json.dumps(
        spec.model_dump(mode="json", exclude=set(exclude)), sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode()).hexdigest()
