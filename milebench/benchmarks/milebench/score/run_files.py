"""A run's score files as the commands that read them see them: each task score and judgment file read
once, an absent one as None or empty, a malformed one a named error."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.score.aggregate import Denominator, TaskScore
from milebench.benchmarks.milebench.score.uncertainty import TaskSamples, task_samples
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.record_files import RecordError, read_records
from milebench.spec.base import describe_errors


def read_task_score(path: Path) -> TaskScore:
    """A task score file; one that does not validate (malformed, or written before the official
    denominator) is a ``RecordError`` naming the file and its fields."""
    try:
        return TaskScore.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as err:
        raise RecordError(
            f"{path}: not a valid task score ({describe_errors(err)}); a file written before scores "
            "divided by every expected sample lacks denominator and scored_only: run `milebench score` again"
        ) from None


class RunFiles:
    """A run's task scores and judgments, read once each; absent files read as None / empty."""

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths
        self._scores: dict[tuple[str, str, Mode], TaskScore | None] = {}
        self._judgments: dict[tuple[str, str, Mode], list[Judgment]] = {}

    def task_score(self, model: str, task: str, mode: Mode) -> TaskScore | None:
        key = (model, task, mode)
        if key not in self._scores:
            path = self.paths.task_score(model, task, mode)
            self._scores[key] = read_task_score(path) if path.exists() else None
        return self._scores[key]

    def judgments(self, model: str, task: str, mode: Mode) -> list[Judgment]:
        key = (model, task, mode)
        if key not in self._judgments:
            path = self.paths.judgments(model, task, mode)
            self._judgments[key] = read_records(path, Judgment) if path.exists() else []
        return self._judgments[key]

    def samples(
        self,
        model: str,
        mode: Mode,
        tasks: Sequence[TaskSpec],
        scorer: str,
        denominator: Denominator = Denominator.EXPECTED,
    ) -> dict[str, TaskSamples]:
        """Per-sample scores of every task with judgments under ``scorer``, for ``denominator``."""
        found = {}
        for task in tasks:
            rows = [j for j in self.judgments(model, task.name, mode) if j.scorer == scorer]
            if rows:
                found[task.name] = task_samples(rows, scorer, denominator)
        return found
