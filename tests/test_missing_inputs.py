"""Every ``milebench`` command run before the stage that makes its input: one error line naming the
file and the command that makes it, a non-zero exit, no traceback. The commands come from the parser,
so a new command, the kit's or a benchmark's, fails here until it declares what makes its inputs
(``made_by`` where it is added to the parser)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from milebench.cli import build_parser
from milebench.spec.folder import DEFAULT_SPECS

ROOT = Path(__file__).resolve().parents[1]
VALUES = {
    "run": "smoke",
    "model": "random",
    "model_a": "random",
    "task": "ActionSequence",
    "mode": "multi-image",
    "data_root": "MileBench",
    "outputs": "outputs/random",
    "family": "kit",
    "registry": "docker://example.org/milebench",
    "out": "out",
    "sample": "0",
    "bundle": "bundle",
}
"""A value for each required argument, by its ``dest``: every command runs against an empty folder."""
VALUES_OF = {name: {"run": "embed-smoke", "model": "bm25"} for name in ("embed-run", "embed-evaluate")}
VALUES_OF["embed-report"] = VALUES_OF["embed-aggregate"] = {"run": "embed-smoke"}
VALUES_OF["embed-pools"] = {"run": "embed-smoke", "dataset": "none"}
VALUES_OF["render-input"] = {"model": "tiny-llava"}
"""Commands that need other values: another benchmark's runs and models, a model render-input shows."""
EXTRA = {
    "score": ["--task", "ActionSequence"],
    "compare": ["--model-b", "tiny-llava"],
    "audit drift": ["--model-b", "tiny-llava"],
}
"""Optional arguments without which a command would stop for another reason than a missing input."""
ERROR_LINE = re.compile(r" ERROR \S+: (?P<path>\S+): (?P<what>.+) not found; run (?P<made_by>.+) first$")


def leaf_commands(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> Iterator[tuple[str, tuple[list[str], tuple[str, ...] | None]]]:
    """(name, (argv, made_by)) of every runnable command; nested ones (``image build``) by their full
    name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from leaf_commands(sub, f"{prefix} {name}".strip())
            return
    argv = prefix.split()
    for action in parser._actions:
        if not action.required:
            continue
        values = {**VALUES, **VALUES_OF.get(prefix, {})}
        if action.dest not in values:
            pytest.fail(f"`milebench {prefix}`: no test value for the required argument {action.dest!r}")
        argv += (
            [values[action.dest]]
            if not action.option_strings
            else [action.option_strings[0], values[action.dest]]
        )
    yield prefix, (argv + EXTRA.get(prefix, []), getattr(parser, "made_by", None))


LEAVES = dict(leaf_commands(build_parser()))
COMMANDS = {name: argv for name, (argv, _) in LEAVES.items()}
MADE_BY = {name: made_by for name, (_, made_by) in LEAVES.items() if made_by is not None}


def test_every_command_declares_what_makes_its_inputs() -> None:
    undeclared = sorted(set(COMMANDS) - set(MADE_BY))
    assert not undeclared, f"declare made_by where {undeclared} are added to the parser"


@pytest.mark.parametrize("name", sorted(name for name, made_by in MADE_BY.items() if made_by))
def test_missing_input_is_one_line_naming_the_file_and_its_maker(name: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "milebench", "--specs", str(DEFAULT_SPECS), *COMMANDS[name]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if " ERROR " in line]
    assert len(errors) == 1, output
    found = ERROR_LINE.search(errors[0])
    assert found, errors[0]
    path = Path(found["path"])
    assert not (path if path.is_absolute() else tmp_path / path).exists()
    assert any(maker in found["made_by"] for maker in MADE_BY[name]), (found["made_by"], MADE_BY[name])
