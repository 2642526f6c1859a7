"""`milebench --help` lists the commands in groups (each benchmark's under its own heading), leaves out
the commands only rules call (which still run), shows examples that parse, and every option's help states
its default."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator

import pytest

from milebench.cli import COMMAND_GROUPS, build_parser, main
from milebench.spec.benchmark import benchmarks

PARSER = build_parser()
HELP = PARSER.format_help()
HIDDEN = {"container-infer"}
"""The commands only rules call: the infer rule's form under deployment docker."""


def sections(text: str) -> dict[str, list[str]]:
    """Each heading of the help text and the commands listed under it (options and examples left out)."""
    found: dict[str, list[str]] = {}
    heading = None
    for line in text.splitlines():
        if line == "examples:":
            break
        if re.fullmatch(r"\S.*:", line):
            heading = line[:-1]
            found[heading] = []
        elif heading is not None and (listed := re.match(r"  ([a-z][a-z-]+)(?:  |$)", line)):
            found[heading].append(listed[1])
    return {h: names for h, names in found.items() if h not in ("options", "positional arguments")}


def subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action


def every_parser(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from every_parser(sub)


def test_commands_are_listed_in_groups_and_each_benchmark_has_its_own() -> None:
    listed = sections(HELP)
    own = [b.title or b.name for b in benchmarks().values() if b.commands is not None]
    assert list(listed) == [*COMMAND_GROUPS, *own]
    assert set(own) == {"MileBench", "MMLongEmbed"}
    embed = sorted(
        name
        for name, p in subparsers(PARSER).choices.items()
        if p.get_default("target").startswith("milebench.benchmarks.mmlongembed.")
    )
    assert sorted(listed["MMLongEmbed"]) == embed and len(embed) > 0
    assert listed["specs"] == ["check-specs", "export-schemas"]
    assert listed["containers"] == ["image"]
    assert {
        "preprocess",
        "score",
        "import-official",
        "aggregate",
        "compare",
        "report",
        "fetch",
        "infer",
    } <= set(listed["MileBench"])
    assert {"render-input", "lock-weights", "audit"} <= set(listed["MileBench"])
    assert listed["bundles"] == ["archive", "verify"]
    every = [name for names in listed.values() for name in names]
    assert len(every) == len(set(every)), "a command listed twice"
    assert set(every) | HIDDEN == set(subparsers(PARSER).choices)


def test_internal_commands_are_hidden_but_still_run(capsys: pytest.CaptureFixture[str]) -> None:
    for name in HIDDEN:
        assert not re.search(rf"^\s+{name}\b", HELP, re.M)
    args = PARSER.parse_args(["container-infer", "--model", "m", "--task", "T", "--mode", "multi-image"])
    assert args.target == "milebench.benchmarks.milebench.containers:container_infer"
    with pytest.raises(SystemExit) as done:
        main(["container-infer", "--help"])
    assert done.value.code == 0
    assert "usage: milebench container-infer" in capsys.readouterr().out


def test_an_unknown_command_is_answered_with_the_listed_ones_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["nope"])
    assert done.value.code == 2
    error = capsys.readouterr().err
    offered = re.search(r"invalid choice: 'nope' \(choose from (.*)\)", error)
    assert offered is not None, error
    assert set(offered[1].split(", ")) == set(subparsers(PARSER).choices) - HIDDEN
    assert "Traceback" not in error


def test_every_option_with_a_default_states_it() -> None:
    """Flags state theirs too (off); a required option has none."""
    silent = []
    for parser in every_parser(PARSER):
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or action.required or isinstance(action, argparse._HelpAction):
                continue
            text = formatter._expand_help(action) if action.help else ""
            if "default" not in text.lower():
                silent.append(f"{parser.prog} {action.option_strings[0]}")
    assert not silent, f"options whose help states no default: {silent}"


def test_a_concrete_default_is_shown_as_its_value() -> None:
    [compare] = [p for p in every_parser(PARSER) if p.prog == "milebench compare"]
    text = " ".join(compare.format_help().split())
    assert "Bootstrap resamples. (default: 5000)" in text
    assert "(default: multi-image)" in text
    assert "Run spec name (specs/runs/<name>.yaml). (default: smoke)" in text


def test_the_examples_parse() -> None:
    assert PARSER.epilog is not None
    examples = re.findall(r"^  (milebench .*)$", PARSER.epilog.replace("\\\n", " "), re.M)
    assert len(examples) >= 5
    for line in examples:
        argv = shlex.split(line.split("#")[0])[1:]
        if "--help" in argv:
            continue
        args = PARSER.parse_args(argv)
        assert args.target, line


def test_in_image_runs_only_a_command_whose_benchmark_says_how() -> None:
    """``--in-image`` hands the command line to what the command's benchmark declares; a core command has
    none, and is refused by name before anything runs."""
    with pytest.raises(SystemExit, match="check-specs does not run in an image"):
        main(["--in-image", "kit", "check-specs"])
