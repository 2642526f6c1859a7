"""Read a score job's predictions, refusing records that belong to another task, model or mode."""

from __future__ import annotations

import logging
from pathlib import Path

from milebench.benchmarks.milebench.spec.run import Mode
from milebench.infer.records import Prediction
from milebench.record_files import RecordError, read_records

log = logging.getLogger(__name__)


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
                f"{pred.mode!r} in the file of task {task!r}, model {model!r}, mode {mode!r}"
            )
        by_id[pred.sample_id] = pred
    return by_id
