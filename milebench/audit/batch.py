"""Batch invariance: does an answer change with the batch it is generated in, or from run to run?

The reference answers every sample alone (batch size 1) in prepared order. Each condition is a batch
size; each of its repeats shuffles the samples with its own seeded generator and cuts the shuffled
order into batches of that size, so a sample meets other neighbours (and other padding) every time.
Batch size 1 repeated is the run-to-run check. A sample counts as changed under a condition when any
repeat's text (or score, by the chosen scorer) differs from the reference; rates carry Wilson intervals.
Where both runs report ids, the first step at which they part is recorded with the reference's
top-1/top-2 margin there: below ``tie_margin`` the change is a near-tie (a numerical coin flip),
above it a real change.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from milebench.audit.stats import Rate, wilson_rate
from milebench.audit.trace import Trace
from milebench.infer.records import ModelInput
from milebench.spec.base import Spec

Sample = TypeVar("Sample", bound=ModelInput)
Generate = Callable[[Sequence[Sample]], list[Trace]]
"""One batch in, one trace per sample out (:func:`milebench.audit.trace.traced` bound to an adapter)."""
Score = Callable[[Sample, str | None], float | None]
"""A sample's score for an answer text (None: the answer failed), by the benchmark's scorer."""

ALL_TASKS = "all"
"""The task column of the rows that pool every task."""


class SampleChange(Spec):
    """One sample under one condition, against its reference answer."""

    task: str
    sample_id: int
    batch_size: int
    repeats: int
    text_changes: int
    score_changes: int
    reference_text: str | None
    changed_text: str | None = None
    """The first repeat's differing text, when one differs."""
    reference_score: float | None
    changed_score: float | None = None
    first_divergence: int | None = None
    """The earliest generated step at which a repeat's ids part from the reference's."""
    reference_margin: float | None = None
    """The reference's top-1 minus top-2 log-probability at ``first_divergence`` (nats)."""
    margin: float | None = None
    """The same margin in the repeat that parted there."""
    near_tie: bool | None = None


class ConditionSummary(Spec):
    """Per task (and ``all``) and batch size: samples whose text or score changed in any repeat."""

    task: str
    batch_size: int
    repeats: int
    texts: Rate
    scores: Rate
    divergences: int
    """Changed samples whose first divergent step is known (both runs reported ids)."""
    near_ties: int


class BatchAudit(Spec):
    model: str
    execution: str
    scorer: str
    batch_sizes: tuple[int, ...]
    repeats: int
    seed: int
    tie_margin: float
    summary: tuple[ConditionSummary, ...]
    samples: tuple[SampleChange, ...]


def shuffled_batches(samples: Sequence[Sample], size: int, seed: int, repeat: int) -> list[list[Sample]]:
    """The samples in an order drawn for (seed, size, repeat), cut into batches of ``size``."""
    order = list(samples)
    random.Random(f"{seed}/{size}/{repeat}").shuffle(order)
    return [order[i : i + size] for i in range(0, len(order), size)]


def answer_all(
    generate: Generate[Sample], batches: Sequence[Sequence[Sample]]
) -> dict[tuple[str, int], Trace]:
    """Every sample's trace, keyed by (task, sample_id)."""
    found: dict[tuple[str, int], Trace] = {}
    for batch in batches:
        traces = generate(batch)
        if len(traces) != len(batch):
            raise RuntimeError(f"{len(traces)} traces for a batch of {len(batch)} samples")
        found.update({(s.task, s.sample_id): t for s, t in zip(batch, traces, strict=True)})
    return found


def first_divergence(reference: Sequence[int], other: Sequence[int]) -> int | None:
    """The first step at which two id sequences differ (one ending first counts); None if equal."""
    for i, (a, b) in enumerate(zip(reference, other, strict=False)):
        if a != b:
            return i
    return None if len(reference) == len(other) else min(len(reference), len(other))


def margin_at(trace: Trace, step: int) -> float | None:
    return trace.margins[step] if trace.margins is not None and step < len(trace.margins) else None


def compare_sample(
    sample: ModelInput,
    reference: Trace,
    runs: Sequence[Trace],
    size: int,
    score: Callable[[str | None], float | None],
    tie_margin: float,
) -> SampleChange:
    """One sample's repeats under one batch size against its reference."""
    base = score(reference.text)
    values = [score(run.text) for run in runs]
    changed = [(run, value) for run, value in zip(runs, values, strict=True) if run.text != reference.text]
    parted = [
        (step, run)
        for run in runs
        if reference.tokens is not None and run.tokens is not None
        for step in [first_divergence(reference.tokens, run.tokens)]
        if step is not None
    ]
    step, run = min(parted, key=lambda found: found[0]) if parted else (None, None)
    ref_margin = None if step is None else margin_at(reference, step)
    return SampleChange(
        task=sample.task,
        sample_id=sample.sample_id,
        batch_size=size,
        repeats=len(runs),
        text_changes=len(changed),
        score_changes=sum(value != base for value in values),
        reference_text=reference.text,
        changed_text=changed[0][0].text if changed else None,
        reference_score=base,
        changed_score=changed[0][1] if changed else None,
        first_divergence=step,
        reference_margin=ref_margin,
        margin=None if step is None or run is None else margin_at(run, step),
        near_tie=None if ref_margin is None else ref_margin < tie_margin,
    )


def summarise(changes: Sequence[SampleChange], sizes: Sequence[int], repeats: int) -> list[ConditionSummary]:
    """Rates per task and batch size, then pooled over tasks."""
    tasks = sorted({c.task for c in changes})
    rows = []
    for task in [*tasks, ALL_TASKS]:
        for size in sizes:
            group = [c for c in changes if c.batch_size == size and task in (c.task, ALL_TASKS)]
            rows.append(
                ConditionSummary(
                    task=task,
                    batch_size=size,
                    repeats=repeats,
                    texts=wilson_rate(sum(c.text_changes > 0 for c in group), len(group)),
                    scores=wilson_rate(sum(c.score_changes > 0 for c in group), len(group)),
                    divergences=sum(c.first_divergence is not None for c in group),
                    near_ties=sum(bool(c.near_tie) for c in group),
                )
            )
    return rows


def batch_audit(
    generate: Generate[Sample],
    samples: Sequence[Sample],
    score: Score[Sample],
    sizes: Sequence[int],
    repeats: int,
    seed: int = 0,
    tie_margin: float = 0.05,
) -> tuple[list[ConditionSummary], list[SampleChange]]:
    """Summary rows and per-sample changes of every batch size against the batch-size-1 reference."""
    if repeats < 1 or not sizes or min(sizes) < 1:
        raise ValueError(f"batch sizes {list(sizes)} and repeats {repeats} must be at least 1")
    reference = answer_all(generate, [[s] for s in samples])
    changes = []
    for size in sizes:
        runs = [answer_all(generate, shuffled_batches(samples, size, seed, r)) for r in range(repeats)]
        for s in samples:
            key = (s.task, s.sample_id)
            changes.append(
                compare_sample(s, reference[key], [r[key] for r in runs], size, partial(score, s), tie_margin)
            )
    return summarise(changes, sizes, repeats), changes
