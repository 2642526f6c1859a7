"""The audit and bootstrap options take what a run spec's audit section may hold, and nothing more: a
value out of bounds is an argument error (exit 2, the option and its bounds named) before any work."""

import pytest

from milebench.benchmarks.milebench.spec.run import MAX_BATCH_SIZE, MAX_REPEATS, MAX_RESAMPLES
from milebench.cli import build_parser, main

BATCH = ["audit", "batch", "--model", "tiny-llava", "--task", "ALFRED"]
DRIFT = ["audit", "drift", "--model-a", "tiny-llava"]
AGGREGATE = ["aggregate"]
OPTIONS = [
    (BATCH, "--repeats", MAX_REPEATS),
    (BATCH, "--batch-sizes", MAX_BATCH_SIZE),
    (DRIFT, "--resamples", MAX_RESAMPLES),
    (AGGREGATE, "--resamples", MAX_RESAMPLES),
]


@pytest.mark.parametrize(("command", "option", "high"), OPTIONS)
def test_the_bounds_themselves_are_accepted(command: list[str], option: str, high: int) -> None:
    for value in (1, high):
        args = build_parser().parse_args([*command, option, str(value)])
        parsed = getattr(args, option.lstrip("-").replace("-", "_"))
        assert parsed in (value, (value,))


@pytest.mark.parametrize(("command", "option", "high"), OPTIONS)
@pytest.mark.parametrize("beyond", ["low", "high", "word"])
def test_beyond_the_bounds_is_an_argument_error(
    command: list[str], option: str, high: int, beyond: str, capsys: pytest.CaptureFixture[str]
) -> None:
    value = {"low": "0", "high": str(high + 1), "word": "many"}[beyond]
    with pytest.raises(SystemExit) as exit_:
        main([*command, option, value])
    assert exit_.value.code == 2
    message = capsys.readouterr().err
    assert f"argument {option}" in message
    assert (f"from 1 to {high}" in message) if beyond != "word" else ("not a whole number" in message)


def test_one_size_out_of_a_list_refuses_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*BATCH, "--batch-sizes", f"1,4,{MAX_BATCH_SIZE + 1}"])
    assert exit_.value.code == 2
    assert f"{MAX_BATCH_SIZE + 1}: from 1 to {MAX_BATCH_SIZE}" in capsys.readouterr().err
