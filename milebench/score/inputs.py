"""Read the score stage's inputs (prepared samples, predictions), naming the file and record that is bad."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from milebench.io import read_jsonl
from milebench.records import Prediction, PreparedSample
from milebench.spec.base import field_path
from milebench.spec.run import Mode

log = logging.getLogger(__name__)

R = TypeVar("R", bound=BaseModel)


class RecordError(ValueError):
    """A record in an input file is malformed or belongs to another task, model or mode."""


def read_records(path: Path, model: type[R]) -> list[R]:
    records = []
    for number, row in enumerate(read_jsonl(path), start=1):
        try:
            records.append(model.model_validate(row))
        except ValidationError as err:
            problems = "; ".join(f"{field_path(e['loc'])}: {e['msg']}" for e in err.errors())
            raise RecordError(f"{path}: record {number}: {problems}") from None
    return records


def read_prepared(path: Path) -> list[PreparedSample]:
    if not path.exists():
        raise RecordError(f"{path}: prepared samples not found (run the preprocess stage first)")
    return read_records(path, PreparedSample)


def read_predictions(path: Path, task: str, model: str, mode: Mode) -> dict[int, Prediction]:
    """Predictions by sample id; a missing file means no sample was answered. A later record wins."""
    if not path.exists():
        log.warning("%s: no predictions file; every sample counts as missing", path)
        return {}
    by_id: dict[int, Prediction] = {}
    for number, pred in enumerate(read_records(path, Prediction), start=1):
        if (pred.task, pred.model, pred.mode) != (task, model, mode):
            raise RecordError(
                f"{path}: record {number}: task {pred.task!r}, model {pred.model!r}, mode "
                f"{pred.mode.value!r} in the file of task {task!r}, model {model!r}, mode {mode!r}"
            )
        by_id[pred.sample_id] = pred
    return by_id
