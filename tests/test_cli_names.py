"""A run, model or task name typed wrong on the command line is an argument error (exit 2) that names
the option, offers the closest names and lists the known ones; it is never called an invalid spec."""

from __future__ import annotations

import pytest

from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.cli import main

SPECS = load_specs()
SMOKE = SPECS.run("smoke")
TASK = SPECS.run_tasks(SMOKE)[0].name
MODEL = SMOKE.models[-1]


def score(run: str, model: str, task: str) -> list[str]:
    return ["score", "--run", run, "--model", model, "--task", task, "--mode", "multi-image"]


@pytest.mark.parametrize(
    ("argv", "argument", "typed", "meant", "known"),
    [
        (score("smok", MODEL, TASK), "--run", "smok", "smoke", sorted(SPECS.runs)),
        (score("smoke", MODEL[:-1], TASK), "--model", MODEL[:-1], MODEL, sorted(SMOKE.models)),
        (
            score("smoke", MODEL, TASK[:-1]),
            "--task",
            TASK[:-1],
            TASK,
            sorted(t.name for t in SPECS.run_tasks(SMOKE)),
        ),
    ],
)
def test_a_mistyped_name_is_an_argument_error_that_suggests_the_name_meant(
    caplog: pytest.LogCaptureFixture, argv: list[str], argument: str, typed: str, meant: str, known: list[str]
) -> None:
    assert main(argv) == 2
    [message] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert message.startswith(f"argument {argument}: ")
    assert f"{typed!r}" in message and f"(did you mean {meant}?)" in message
    assert message.endswith(f"; known: {', '.join(known)}")
    assert "invalid spec" not in message


def test_a_name_like_none_of_the_known_suggests_nothing(caplog: pytest.LogCaptureFixture) -> None:
    assert main(score("smoke", "zzzzzz", TASK)) == 2
    [message] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "did you mean" not in message and message.startswith("argument --model: model 'zzzzzz'")
