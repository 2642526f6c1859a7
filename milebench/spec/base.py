"""Shared base for every spec model and the loader that names the file and field on error."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError


class Spec(BaseModel):
    """Immutable, strict base: an unknown key in a spec is a typo, never a silent default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SpecError(ValueError):
    """A spec file failed to load or validate; the message names the file and each bad field."""

    def __init__(self, path: Path | str, problems: list[tuple[str, str]]):
        self.path = Path(path)
        self.problems = problems
        lines = [f"{self.path}: {field}: {message}" for field, message in problems]
        super().__init__("\n".join(lines))


S = TypeVar("S", bound=BaseModel)


def field_path(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as a dotted field path (``models.3.name``)."""
    return ".".join(str(part) for part in loc) or "<root>"


def describe_errors(err: ValidationError) -> str:
    """All field errors of a validation failure on one line: ``field.path: message; ...``."""
    return "; ".join(f"{field_path(e['loc'])}: {e['msg']}" for e in err.errors())


def validate_mapping(path: Path | str, data: object, model: type[S]) -> S:
    """Validate already-parsed data against ``model``, turning errors into a SpecError for ``path``."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        problems = [(field_path(e["loc"]), e["msg"]) for e in err.errors()]
        raise SpecError(path, problems) from None


def read_yaml(path: Path) -> object:
    """Parse a YAML file; a syntax error becomes a SpecError that names the file and line."""
    try:
        with path.open(encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except FileNotFoundError:
        raise SpecError(path, [("<file>", "file not found")]) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "<file>"
        raise SpecError(path, [(where, f"invalid YAML: {err}")]) from None


def load_spec(path: Path, model: type[S]) -> S:
    """Load one YAML spec file into ``model``."""
    return validate_mapping(path, read_yaml(path), model)
