"""Inputs longer than the model's window: always measured, refused only under the strict variant.

The official code cuts the prompt text to a token budget and then generates whatever the model's own
template and image tokens make of it: it never checks the result against the window, and it has no
image limit. The kit does the same by default (``context_overflow: generate``) and records by how much
a sample went over; ``refuse`` fails such a sample as context_overflow without a call.
"""

from __future__ import annotations

from milebench.infer.records import ModelInput, WindowExcess
from milebench.spec.model import ModelSpec


def tokens_over(spec: ModelSpec, input_tokens: int | None) -> int:
    """Tokens of an input past the spec's ``max_context_len``; 0 within it or when either is unknown."""
    if input_tokens is None or spec.max_context_len is None:
        return 0
    return max(input_tokens - spec.max_context_len, 0)


def images_over(spec: ModelSpec, sample: ModelInput) -> int:
    """Images of a sample past the spec's ``max_images``; 0 within it or without a limit."""
    return max(len(sample.images) - spec.max_images, 0) if spec.max_images is not None else 0


def window_excess(spec: ModelSpec, sample: ModelInput, input_tokens: int | None) -> WindowExcess | None:
    """What a generated sample exceeded; None when it fit."""
    tokens, images = tokens_over(spec, input_tokens), images_over(spec, sample)
    if not tokens and not images:
        return None
    return WindowExcess(
        input_tokens=input_tokens,
        max_context_len=spec.max_context_len,
        tokens_over=tokens,
        images=len(sample.images),
        max_images=spec.max_images,
        images_over=images,
    )


def refusal(spec: ModelSpec, input_tokens: int) -> str | None:
    """Why the strict variant refuses an input of ``input_tokens``; None when it fits."""
    if not tokens_over(spec, input_tokens):
        return None
    return f"input of {input_tokens} tokens exceeds max_context_len {spec.max_context_len}"
