"""What each ``milebench`` command reads from an earlier stage, and the error when one is absent.

A missing input is the user's next step, not a bug in the kit: the error names the file and the
command that makes it, on one line, and the command exits non-zero without a traceback.
"""

from __future__ import annotations

from pathlib import Path

from milebench.errors import KitError


class MissingInput(KitError):
    """A stage input that is not on disk; the message names it and the command that makes it."""

    def __init__(self, path: Path, what: str, made_by: str) -> None:
        super().__init__(f"{path}: {what} not found; run {made_by} first")


class NoSuchPath(KitError):
    """A path the user typed (``--data-dir``) that is not there: a typo first, never a hint to make it."""

    exit_status = 2

    def __init__(self, argument: str, path: Path, what: str) -> None:
        super().__init__(f"argument {argument}: {path}: no such {what} (check the path)")


def given(path: Path, argument: str, what: str) -> Path:
    """``path``, typed by the user as ``argument``, when it exists, else ``NoSuchPath``."""
    if not path.exists():
        raise NoSuchPath(argument, path, what)
    return path


def require(path: Path, what: str, made_by: str) -> Path:
    """``path`` when it exists, else ``MissingInput``."""
    if not path.exists():
        raise MissingInput(path, what, made_by)
    return path


def command(name: str, **options: object) -> str:
    """A kit command line as the user types it, quoted: ``command("fetch", run="smoke")``."""
    parts = ["milebench", name, *(f"--{k.replace('_', '-')} {v}" for k, v in options.items())]
    return "`" + " ".join(parts) + "`"
