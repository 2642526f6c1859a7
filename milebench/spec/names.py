"""Looking up a spec by the name a user typed: an unknown name is an argument error that offers the
closest names, never a bare "invalid spec"."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TypeVar

from milebench.spec.base import SpecError

T = TypeVar("T")


class UnknownName(SpecError):
    """A name given by ``argument`` (``--model``) that ``path`` does not hold at ``field``."""

    def __init__(self, path: Path, field: str, argument: str, problem: str):
        self.argument, self.problem = argument, problem
        super().__init__(path, [(field, problem)])


def did_you_mean(name: str, known: Collection[str]) -> str:
    """`` (did you mean a or b?)`` for the known names closest to a typo, else nothing."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def by_name(specs: Mapping[str, T], name: str, kind: str, folder: Path) -> T:
    """``specs[name]``, or an UnknownName listing the ``kind`` specs there are."""
    if name not in specs:
        problem = f"no {kind} spec {name!r}{did_you_mean(name, specs)}; known: {', '.join(sorted(specs))}"
        raise UnknownName(folder, "name", f"--{kind}", problem)
    return specs[name]


def check_in_run(kind: str, name: str, run: str, members: Collection[str], run_file: Path) -> None:
    """An UnknownName (field ``<kind>s`` of the run file) unless ``name`` is one of run ``run``'s
    ``kind``s (models, tasks)."""
    if name not in members:
        known = ", ".join(sorted(members))
        problem = f"{kind} {name!r} is not part of run {run!r}{did_you_mean(name, members)}; known: {known}"
        raise UnknownName(run_file, f"{kind}s", f"--{kind}", problem)
