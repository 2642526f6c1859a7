"""What each ``milebench`` command reads from an earlier stage, and the error when one is absent.

A missing input is the user's next step, not a bug in the kit: the error names the file and the
command that makes it, on one line, and the command exits non-zero without a traceback.
"""

from __future__ import annotations

from pathlib import Path

from milebench.errors import KitError

OFFICIAL_CODE = "the official MileBench code (generate.py)"
"""What makes an official outputs folder: not a kit command."""

MADE_BY: dict[str, tuple[str, ...]] = {
    "check-specs": (),
    "export-schemas": (),
    "fixture": (),
    "fetch": ("milebench fixture", "milebench lock-data"),
    "lock-data": (),
    "lock-weights": (),
    "fetch-weights": (),
    "validate-data": ("milebench fetch",),
    "tiny-model": (),
    "preprocess": ("milebench fetch", "milebench tiny-model"),
    "infer": ("milebench preprocess", "milebench tiny-model"),
    "score": ("milebench preprocess", OFFICIAL_CODE, "milebench fetch"),
    "report": ("milebench score", "milebench aggregate"),
    "aggregate": ("milebench score",),
    "compare": ("milebench score",),
    "show": ("milebench score",),
    "audit batch": ("milebench preprocess", "milebench tiny-model"),
    "audit drift": ("milebench score",),
    "import-official": (),  # its folders are typed by the user: a wrong one is a NoSuchPath
    "image build": (),
    "image uri": (),
    "image prune": (),
    "container-infer": ("milebench preprocess", "milebench image build"),
    "render-input": ("milebench preprocess", "milebench tiny-model"),
    "embed-generate": (),
    "embed-pools": (),
    "embed-run": ("milebench embed-generate",),
    "embed-evaluate": ("milebench embed-run",),
    "embed-aggregate": ("milebench embed-evaluate", "milebench embed-generate"),
    "embed-report": ("milebench embed-evaluate", "milebench embed-aggregate"),
    "archive": ("milebench report",),
    "verify": ("milebench archive",),
}
"""Per command: what makes the stage inputs it refuses to run without (empty: it reads none).

Specs and the files a user names on purpose (a CA bundle, a mirror's lock) are not stage inputs.
The tests walk every command of the parser against this table, so a new command must be listed."""


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


def preprocess_command(run: str, task: str, mode: object, regime: str) -> str:
    """The command that writes one prepared file (``RunPaths.prepared``)."""
    return command("preprocess", run=run, task=task, mode=mode, regime=regime)
