"""Scorers by name: every judgment names the scorer that made it, and ``paper`` is always the default."""

from __future__ import annotations

from collections.abc import Callable

from milebench.records import ScoredSample
from milebench.score import paper, standard
from milebench.spec.task import TaskSpec

Judge = Callable[[TaskSpec, ScoredSample, str], tuple[str | None, float]]
"""(task, sample, raw response) -> (extracted option key or None, score in [0, 1])."""

DEFAULT_SCORER = paper.SCORER_NAME
SCORERS: dict[str, Judge] = {paper.SCORER_NAME: paper.judge, standard.SCORER_NAME: standard.judge}
"""Every scorer the score stage runs, the default first."""


def scorer(name: str) -> Judge:
    if name not in SCORERS:
        raise KeyError(f"unknown scorer {name!r}; known: {', '.join(SCORERS)}")
    return SCORERS[name]
