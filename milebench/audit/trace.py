"""What an adapter generated for each sample of a batch: the answer text and, for ``transformers``
models, the generated ids and the top-1/top-2 log-probability margin at every step.

The adapter runs its own code path unchanged (prompt, images, ``per_sample`` or ``batched`` decoding,
stop strings); only its model's ``generate`` is asked for the step scores too
(``output_scores``/``return_dict_in_generate``) and hands the adapter the ids it would have had. The
margin is taken on the scores greedy decoding chose from (after the adapter's logits processors), so a
small margin where two runs part says the change was a near-tie, a large one that it was not.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from milebench.infer.adapter import Adapter, SampleFailure
from milebench.infer.records import ModelInput


@dataclass(frozen=True)
class Trace:
    """One sample's generation: its answer (``None`` when it failed), and its generated ids and step
    margins (nats) where the model reports them."""

    text: str | None
    tokens: tuple[int, ...] | None = None
    margins: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Rows:
    """The ids and margins of the rows of one ``generate`` call, each cut after its end of sequence."""

    tokens: list[tuple[int, ...]]
    margins: list[tuple[float, ...]]


def row_length(ids: Sequence[int], eos: set[int], pad: int | None) -> int:
    """Steps that belong to the answer: up to and including the first end-of-sequence id, else without
    the trailing padding a finished row of a batch is filled with."""
    for i, token in enumerate(ids):
        if token in eos:
            return i + 1
    end = len(ids)
    while pad is not None and pad not in eos and end and ids[end - 1] == pad:
        end -= 1
    return end


def ids_of(value: Any) -> set[int]:
    """A generation config's id setting (one id, a list or none) as a set."""
    if value is None:
        return set()
    return {int(v) for v in value} if isinstance(value, list | tuple) else {int(value)}


def scored_rows(output: Any, eos: set[int], pad: int | None) -> Rows:
    """Rows of a ``generate`` output with scores: the last ``len(scores)`` ids of each are the new ones
    (whether the prompt was passed as ids or as embeddings)."""
    import torch

    steps = len(output.scores)
    new = output.sequences[:, output.sequences.shape[1] - steps :].tolist()
    logprobs = torch.stack(output.scores, dim=1).float().log_softmax(dim=-1)
    top = logprobs.topk(2, dim=-1).values
    gaps = (top[..., 0] - top[..., 1]).tolist()
    tokens, margins = [], []
    for ids, row in zip(new, gaps, strict=True):
        n = row_length(ids, eos, pad)
        tokens.append(tuple(ids[:n]))
        margins.append(tuple(float(g) for g in row[:n]))
    return Rows(tokens, margins)


@contextmanager
def recording_steps(model: Any) -> Iterator[list[Rows]]:
    """While open, every ``model.generate`` call also returns its step scores to the list yielded; the
    caller still gets the ids alone, as without recording."""
    calls: list[Rows] = []
    original = model.generate
    config = model.generation_config
    eos, pad = ids_of(config.eos_token_id), config.pad_token_id

    def generate(*args: Any, **kwargs: Any) -> Any:
        output = original(*args, **kwargs, output_scores=True, return_dict_in_generate=True)
        calls.append(scored_rows(output, eos, kwargs.get("pad_token_id", pad)))
        return output.sequences

    model.generate = generate
    try:
        yield calls
    finally:
        del model.generate


def traced(adapter: Adapter, batch: Sequence[ModelInput]) -> list[Trace]:
    """One trace per sample of ``batch``, generated as one batch by the adapter. Ids and margins come
    with adapters that generate through a ``transformers`` model, when the recorded rows pair up with
    the samples (one row per sample over the batch's ``generate`` calls)."""
    model = getattr(adapter, "model", None)
    if model is None or not hasattr(model, "generation_config"):
        return [Trace(text=text_of(a)) for a in adapter.generate(batch)]
    with recording_steps(model) as calls:
        answers = adapter.generate(batch)
    tokens = [t for call in calls for t in call.tokens]
    margins = [m for call in calls for m in call.margins]
    if len(tokens) != len(batch):
        return [Trace(text=text_of(a)) for a in answers]
    return [
        Trace(text=text_of(a), tokens=t, margins=m) for a, t, m in zip(answers, tokens, margins, strict=True)
    ]


def text_of(answer: str | SampleFailure) -> str | None:
    return None if isinstance(answer, SampleFailure) else answer
