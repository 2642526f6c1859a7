"""Scorers by name, registered by entry point: every judgment names the scorer that made it, and ``paper``
is always the default.

A scorer is one line of a distribution's metadata (the kit's own are in ``pyproject.toml``)::

    [project.entry-points."milebench.scorers"]
    strict = "mybench.scoring:strict_judge"

Every registered scorer judges every sample; the others than ``paper`` (the variants) are aggregated and
reported beside it. A scorer's module is imported only when it judges.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from milebench.errors import KitError
from milebench.plugins import registered

Judge = Callable[..., tuple[str | None, float]]
"""(task, sample, raw response) -> (extracted option key or None, score in [0, 1]); the task and the sample
are the benchmark's own specs and records, so their types are the benchmark's to state."""

ENTRY_POINTS = "milebench.scorers"
"""The entry point group a scorer registers in: ``name = "module:function"``, a :data:`Judge`."""
DEFAULT_SCORER = "paper"


class BadScorer(KitError):
    """An unknown scorer, an entry point that names no function, or no ``paper`` among them (the kit's
    package metadata missing or stale): named, with the known ones."""

    exit_status = 2


@cache
def scorer_names() -> tuple[str, ...]:
    """Every registered scorer, the default first, then the variants by name (read, never imported)."""
    names = {point.name for point in registered(ENTRY_POINTS)}
    if DEFAULT_SCORER not in names:
        raise BadScorer(
            f"no scorer {DEFAULT_SCORER!r} among the entry points of group {ENTRY_POINTS}: the kit's package "
            "metadata is missing or stale; reinstall the kit (pip install -e .)"
        )
    return (DEFAULT_SCORER, *sorted(names - {DEFAULT_SCORER}))


def variant_scorers() -> tuple[str, ...]:
    """The registered scorers other than the default, by name: what the aggregate and report set beside it."""
    return scorer_names()[1:]


@cache
def scorer(name: str) -> Judge:
    """The judge registered as ``name``, imported on first use."""
    points = [point for point in registered(ENTRY_POINTS) if point.name == name]
    if not points:
        raise BadScorer(f"unknown scorer {name!r}; known: {', '.join(scorer_names())}")
    point = points[0]
    judge = point.load()
    if not callable(judge):
        raise BadScorer(
            f"entry point {name} = {point.value!r} of group {ENTRY_POINTS}: not a function "
            f"(got {type(judge).__name__})"
        )
    found: Judge = judge
    return found
