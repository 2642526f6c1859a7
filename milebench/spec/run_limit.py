"""The command line's ``--limit`` (Snakemake's ``--config limit=N``): it replaces the limit of every run a
command of this process looks up, in this process only."""

from __future__ import annotations

_limit: list[int] = []


def limit_runs(limit: int | None) -> None:
    """Make every run looked up in this process a subset of at most ``limit`` samples per task."""
    _limit[:] = [] if limit is None else [limit]


def run_limit() -> int | None:
    """The limit this process replaces each run's with; None: each run's own."""
    return _limit[0] if _limit else None
