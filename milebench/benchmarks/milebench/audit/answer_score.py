"""What the batch audit scores a MileBench answer by: the chosen scorer on the sample's task."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from milebench.audit.batch import Score
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.score.registry import Judge


def judged(
    judge: Judge, tasks: Mapping[str, TaskSpec], sample: PreparedSample, text: str | None
) -> float | None:
    """The sample's score for ``text``; a failed answer (None) scores 0, as the official denominator
    counts it."""
    return 0.0 if text is None else judge(tasks[sample.task], sample, text)[1]


def answer_score(tasks: Mapping[str, TaskSpec], judge: Judge) -> Score[PreparedSample]:
    return partial(judged, judge, tasks)
