"""Local models stop generating at the spec's time limit (transformers ``max_time``); a generation the
limit cut short is a timeout, never an answer."""

from __future__ import annotations

from collections.abc import Sequence

from milebench.infer.adapter import SampleFailure
from milebench.infer.records import FailureKind


def cut_by_time_limit(tokens: Sequence[int], max_new_tokens: int, eos: int | list[int] | None) -> bool:
    """Whether the limit stopped a generation: it has no end token and did not use its whole budget."""
    if len(tokens) >= max_new_tokens:
        return False
    ends = set(eos) if isinstance(eos, list) else {eos}
    return not ends.intersection(tokens)


def timeout_failure(limit_s: float, batch_rows: int, new_tokens: int) -> SampleFailure:
    return SampleFailure(
        FailureKind.TIMEOUT,
        f"generation passed {limit_s:g} s per sample ({batch_rows} in the batch) "
        f"after {new_tokens} new tokens",
    )
