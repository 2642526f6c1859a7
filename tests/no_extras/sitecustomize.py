"""Hides the modules named in ``MILEBENCH_BLOCKED`` (comma-separated top-level names) as if they were not
installed: ``import`` fails and ``importlib.util.find_spec`` says None, as libraries probing optional
packages expect. Used for the packages only the kit's extras bring (tests/test_plain_install.py)."""

import os
import sys
from typing import Any

BLOCKED = frozenset(filter(None, os.environ.get("MILEBENCH_BLOCKED", "").split(",")))


class Hiding:
    """A meta path finder that finds nothing blocked and delegates everything else."""

    def __init__(self, finder: Any) -> None:
        self.finder = finder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.partition(".")[0] in BLOCKED:
            return None
        find = getattr(self.finder, "find_spec", None)
        return find(name, path, target) if find is not None else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.finder, name)


sys.meta_path[:] = [Hiding(finder) for finder in sys.meta_path]
