"""Per-sample records behind the scores (judgments, prepared samples), read once and only when needed.

The verdict's intervals and the needle heatmaps need per-sample scores; the tables need only the task
score files. An absent file is ``None`` (the report says what it could not show); a malformed one is
an error that names the file and the record.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from milebench.benchmarks.milebench.paths import UNLIMITED_REGIME, RunPaths
from milebench.benchmarks.milebench.records import Judgment, PreparedSample
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.record_files import read_records

R = TypeVar("R", Judgment, PreparedSample)


class Evidence:
    """Cached readers of a run's judgments and prepared samples."""

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths
        self._judgments: dict[tuple[str, str, Mode], list[Judgment] | None] = {}
        self._prepared: dict[tuple[str, Mode, str], list[PreparedSample] | None] = {}

    def judgments(self, model: str, task: str, mode: Mode) -> list[Judgment] | None:
        key = (model, task, mode)
        if key not in self._judgments:
            self._judgments[key] = _read(self.paths.judgments(model, task, mode), Judgment)
        return self._judgments[key]

    def prepared(self, task: str, mode: Mode, regime: str = UNLIMITED_REGIME) -> list[PreparedSample] | None:
        """The prepared samples of one input regime (each model reads its own regime's file)."""
        key = (task, mode, regime)
        if key not in self._prepared:
            self._prepared[key] = _read(self.paths.prepared(task, mode, regime), PreparedSample)
        return self._prepared[key]


def _read(path: Path, model: type[R]) -> list[R] | None:
    return read_records(path, model) if path.exists() else None
