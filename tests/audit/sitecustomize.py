"""Loaded by every Python process started with this folder on PYTHONPATH (see test_declared_files.py).

A ``milebench`` process records, through an audit hook, every file it opens for reading or writing, every
rename, removal and folder it creates or lists, and writes them as JSON to ``$MILEBENCH_AUDIT/<pid>.json``
when it exits; any other process is left alone.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from typing import Any

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _path(value: Any) -> str | None:
    if isinstance(value, int):
        return None
    return os.path.abspath(os.fsdecode(value))


def _install(folder: str) -> None:
    seen: dict[str, list[Any]] = {"read": [], "write": [], "rename": [], "mkdir": [], "list": []}

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = args
            found = _path(path)
            if found is not None:
                write = (
                    bool(flags & WRITE_FLAGS) if isinstance(flags, int) else any(c in mode for c in "wax+")
                )
                seen["write" if write else "read"].append(found)
        elif event == "os.rename":
            src, dst = _path(args[0]), _path(args[1])
            if src is not None and dst is not None:
                seen["rename"].append([src, dst])
        elif event in ("os.remove", "os.rmdir"):
            found = _path(args[0])
            if found is not None:
                seen["write"].append(found)
        elif event == "os.mkdir":
            found = _path(args[0])
            if found is not None:
                seen["mkdir"].append(found)
        elif event in ("os.listdir", "os.scandir"):
            found = _path(args[0] if args[0] is not None else ".")
            if found is not None:
                seen["list"].append(found)

    def dump() -> None:
        record: dict[str, Any] = {k: sorted(set(v)) for k, v in seen.items() if k != "rename"}
        record.update(argv=sys.orig_argv, cwd=os.getcwd(), rename=seen["rename"])
        with open(os.path.join(folder, f"{os.getpid()}.json"), "w", encoding="utf-8") as fh:
            json.dump(record, fh)

    sys.addaudithook(hook)
    atexit.register(dump)


if os.environ.get("MILEBENCH_AUDIT") and sys.orig_argv[1:3] == ["-m", "milebench"]:
    _install(os.environ["MILEBENCH_AUDIT"])
