"""Benchmark inputs: a scratch run layout and synthetic words; the prepared mini-MileBench itself comes
from ``milebench.benchmarks.milebench.fixture.prepared``, so the numbers describe the real code paths.
"""

from __future__ import annotations

from pathlib import Path

from milebench.benchmarks.milebench.paths import RunPaths

FILLER_WORDS = (
    *("the", "red", "cube", "moves", "left", "while", "a", "small", "blue", "sphere", "stays", "on"),
    *("the", "table", "near", "the", "door"),
)
"""Words for synthetic prompt text and long answers."""


def bench_paths(root: Path) -> RunPaths:
    """A run layout inside a scratch folder."""
    return RunPaths(out=root / "out", reports=root / "reports")
