"""The options several ``milebench`` commands share, the kit's and each benchmark's alike, so a run, a
root or a bound reads the same everywhere."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from milebench.spec.run import Mode


class AddCommand(Protocol):
    """The parser's ``add``: a subcommand whose handler ``target`` (``module:function``) is imported only
    when it runs. ``made_by`` names the commands that make the stage inputs it reads (empty: it reads
    none), so the error for a missing one can name its maker; the tests run every command against an
    empty folder to hold each to it. Specs and the files a user names on purpose (a CA bundle, a mirror's
    lock) are not stage inputs."""

    def __call__(
        self, name: str, target: str, help: str, *, made_by: tuple[str, ...] | None = None
    ) -> argparse.ArgumentParser: ...


def run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", default="smoke", help="Run spec name (specs/runs/<name>.yaml).")


def root_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        help="Folder the run's files are laid out under (results/<run>/, reports/<run>/); default: the "
        "working folder. Snakemake passes each job's own: its staged copy under a storage provider.",
    )


def run_root_args(p: argparse.ArgumentParser) -> None:
    """--run and --root: the run and the folder its files lie under, as every stage of a run takes."""
    run_args(p)
    root_arg(p)


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type for a whole number from ``low`` to ``high``: the same bounds a run spec's audit
    section has, so a command line cannot ask for what a spec may not."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value}: from {low} to {high}")
        return value

    return parse


def bounded_ints(low: int, high: int) -> Callable[[str], tuple[int, ...]]:
    """An argparse type for comma-separated whole numbers (``1,4,8``), each from ``low`` to ``high``."""
    each = bounded_int(low, high)

    def parse(text: str) -> tuple[int, ...]:
        return tuple(each(part) for part in text.split(","))

    return parse


def seed_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="Seed of the random draws (bootstrap, shuffles).")


def scorer_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scorer", default="paper", help="Scorer whose judgments are compared.")


def mode_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", type=Mode, choices=list(Mode), default=Mode.MULTI_IMAGE, help="The mode.")


def threads_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="The job's CPU threads: from 2 on, one builds the next inputs in a worker process and the "
        "rest go to the model's libraries; default: all cores to the model, inputs built in line.",
    )


def job_args(
    p: argparse.ArgumentParser, model: bool, task_required: bool = True, many_tasks: bool = False
) -> None:
    run_root_args(p)
    if model:
        p.add_argument("--model", required=True, help="A model of the run.")
    if many_tasks:
        p.add_argument(
            "--task",
            action="append",
            required=True,
            help="A task; repeat it to answer several, loading once.",
        )
    elif task_required:
        p.add_argument("--task", required=True, help="A task of the run.")
    else:
        p.add_argument(
            "--task",
            help="A task of the run; required without --official-outputs (default there: every task).",
        )
    p.add_argument("--mode", required=True, type=Mode, choices=list(Mode), help="The mode.")
