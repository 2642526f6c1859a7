"""Read stage records (JSON lines of prepared samples, predictions, judgments; aggregates and verdicts
from JSON), naming a bad file and record."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from milebench.errors import KitError
from milebench.io import jsonl_lines
from milebench.spec.base import describe_errors
from milebench.stage_inputs import require

R = TypeVar("R", bound=BaseModel)


class RecordError(KitError, ValueError):
    """A record in an input file is malformed or belongs to another task, model or mode."""


def read_records(path: Path, model: type[R]) -> list[R]:
    """Every record of ``path``; a record that is not even JSON is named like one with a bad field."""
    records = []
    for number, (_, line) in enumerate(jsonl_lines(path), start=1):
        try:
            records.append(model.model_validate_json(line))
        except ValidationError as err:
            raise RecordError(f"{path}: record {number}: {describe_errors(err)}") from None
    return records


def read_record(path: Path, model: type[R], what: str, made_by: str) -> R:
    """One JSON record (an aggregate, a verdict); absent: ``MissingInput`` naming ``made_by``, malformed:
    ``RecordError`` naming the file and its fields."""
    try:
        return model.model_validate_json(require(path, what, made_by).read_text(encoding="utf-8"))
    except ValidationError as err:
        raise RecordError(
            f"{path}: not a valid {what} ({describe_errors(err)}); run {made_by} again"
        ) from None
