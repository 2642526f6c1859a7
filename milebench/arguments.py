"""The options several ``milebench`` commands share, the kit's and each benchmark's alike, so a run, a
root or a bound reads the same everywhere."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Protocol


class KitParser(argparse.ArgumentParser):
    """An unknown command is answered with the commands ``--help`` lists, not the ones only rules call."""

    listed: list[str]
    made_by: tuple[str, ...] | None = None
    """The commands that make the stage inputs this command reads (``AddCommand``); None: undeclared."""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            names = ", ".join(self.listed)
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {names})")
        super()._check_value(action, value)


class AddCommand(Protocol):
    """The parser's ``add``: a subcommand whose handler ``target`` (``module:function``) is imported only
    when it runs. ``made_by`` names the commands that make the stage inputs it reads (empty: it reads
    none), so the error for a missing one can name its maker; the tests run every command against an
    empty folder to hold each to it. Specs and the files a user names on purpose (a CA bundle, a mirror's
    lock) are not stage inputs. ``listed=False``: a command only rules call, left out of ``milebench
    --help``; it still runs."""

    def __call__(
        self,
        name: str,
        target: str,
        help: str,
        *,
        made_by: tuple[str, ...] | None = None,
        listed: bool = True,
    ) -> KitParser: ...


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """States every option's default after its help, unless the help already says it: a flag is off, a
    list empty is none, a default of None has no value to show (its help says what happens without it).
    The description and epilog keep their line breaks (the examples)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or action.required
            or default is None
            or default is argparse.SUPPRESS
            or "default" in text.lower()
        ):
            return action.help
        if default is False:
            shown = "off"
        elif isinstance(default, list | tuple):
            shown = ",".join(map(str, default)) or "none"
        else:
            shown = str(default)
        return f"{text} (default: {shown.replace('%', '%%')})".lstrip()


def subcommands(p: KitParser, dest: str) -> AddCommand:
    """``add`` for the subcommands of a command (``image build``), each listed in its own help."""
    commands = p.add_subparsers(dest=dest, required=True)

    def add_nested(
        name: str, target: str, help: str, *, made_by: tuple[str, ...] | None = None, listed: bool = True
    ) -> KitParser:
        q = commands.add_parser(name, help=help, description=help, formatter_class=HelpFormatter)
        q.made_by = made_by
        q.set_defaults(target=target)
        return q

    return add_nested


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


def threads_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="The job's CPU threads: from 2 on, one builds the next inputs in a worker process and the "
        "rest go to the model's libraries; default: all cores to the model, inputs built in line.",
    )
