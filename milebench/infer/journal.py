"""The files a job keeps beside its journal: a lock that makes it the cell's only job, and a side file
for journal lines that are not predictions.

The lock is held for the whole job: a second job on the same cell would answer (and pay for) the same
samples again, so it stops at once instead of waiting, possibly for hours on a held GPU, for answers it
would then reuse anyway. It is a POSIX record lock (``lockf``), which the kernel drops the moment its
process dies, so a killed job never blocks the next; unlike ``flock``, it is not shared with forked
input workers, which could otherwise hold it for the milliseconds they take to die after a killed job.
Such a lock belongs to a process, so it keeps other processes out, not a second job of the same one.

A journal line that is not a prediction (a disk or editor accident, a stray write) is moved to
``<journal>.corrupt`` with its line number, and its sample is answered again; every valid line is kept.
"""

from __future__ import annotations

import errno
import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from milebench.errors import KitError
from milebench.infer.records import Prediction
from milebench.io import JsonlAppender, jsonl_lines
from milebench.spec.base import describe_errors

log = logging.getLogger(__name__)

LOCK_SUFFIX = ".lock"
CORRUPT_SUFFIX = ".corrupt"


class CellBusy(KitError, RuntimeError):
    """Another job holds the cell's lock."""


def beside(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


@contextmanager
def cell_lock(journal: Path, cell: str) -> Iterator[Path]:
    """Hold the cell's lock file beside ``journal`` for the block; raise ``CellBusy`` if a live job does."""
    lock = beside(journal, LOCK_SUFFIX)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        try:
            fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            raise CellBusy(
                f"{cell}: another job is answering this cell (it holds {lock}); "
                "rerun when it has finished, its answers will be reused"
            ) from None
        yield lock


def read_predictions(path: Path) -> list[Prediction]:
    """The predictions of a journal or output; lines that are not one are set aside, never fatal."""
    predictions: list[Prediction] = []
    corrupt: list[dict[str, object]] = []
    for number, line in jsonl_lines(path):
        try:
            predictions.append(Prediction.model_validate_json(line))
        except ValidationError as err:
            text = line.decode("utf-8", "backslashreplace").rstrip("\n")
            corrupt.append({"line": number, "error": describe_errors(err), "text": text})
    if not corrupt:
        return predictions
    side = beside(path, CORRUPT_SUFFIX)
    with JsonlAppender(side) as appender:
        appender.append({"file": str(path), **row} for row in corrupt)
    for row in corrupt:
        log.warning(
            "%s: line %d is not a prediction (%s); moved to %s, its sample is answered again",
            path,
            row["line"],
            row["error"],
            side,
        )
    return predictions
