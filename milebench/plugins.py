"""The entry points the kit's registries are declared by (benchmarks, adapter families, scorers), read once
per process.

Reading entry points scans the metadata of every installed distribution (tens of milliseconds in a full
environment), and every job of a run is a process of its own that consults several registries: one scan
serves them all.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import Protocol


class Selectable(Protocol):
    """What ``entry_points()`` returns: all groups (a mapping of them before Python 3.12)."""

    def select(self, *, group: str) -> EntryPoints: ...


@cache
def installed_entry_points() -> Selectable:
    """Every entry point of the installed distributions, as this process first finds them."""
    return entry_points()


def registered(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of ``group``."""
    return tuple(installed_entry_points().select(group=group))
