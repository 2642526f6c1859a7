"""Run an adapter over prepared samples: official batching, per-sample cache keys, crash-safe resume.

Each finished batch is appended (fsync'd) to the predictions file at once, so a killed job loses at most
the batch in flight. A rerun skips every sample whose stored answer has the current cache key; failed
samples are retried. At the end the output is written with current records only, in prepared order.

A batch that runs out of GPU memory is halved and retried down to single samples; each prediction
records the batch size that answered it. An input past the model's window is generated, as the official
code did, and its prediction records by how much (``over_window``); the run's ``context_overflow:
refuse`` fails such samples instead. A sample whose image changed since preprocessing, or cannot be
decoded, fails on its own and the rest of its batch is answered (``images``). With an input worker (a
job of two or more threads), the next batches' inputs are built in another process while the model
answers this one (``prefetch``). One job at a time answers a cell: it holds a lock beside the journal
(``journal``)."""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from milebench.infer.adapter import (
    FIRST_FAILURES,
    Adapter,
    AdapterError,
    BuildsInputs,
    CountsCells,
    ImageError,
    ReportsUsage,
    SampleFailure,
    TokenUsage,
    failure_kind,
)
from milebench.infer.images import changed_images
from milebench.infer.journal import cell_lock, read_predictions
from milebench.infer.prefetch import InputFailure, input_failure, prefetched, worth_a_worker
from milebench.infer.progress import Progress
from milebench.infer.records import FailureKind, ModelInput, Prediction
from milebench.infer.window import images_over, window_excess
from milebench.io import JsonlAppender, atomic_write_jsonl, canonical_json, sha256_text
from milebench.spec.base import spec_hash
from milebench.spec.model import (
    ApiLimits,
    ApiModel,
    ApiPricing,
    BatchRule,
    HubWeights,
    ImageInput,
    ModelSpec,
)
from milebench.spec.model_execution import execution_of
from milebench.spec.policy import ContextOverflow, RunPolicy

log = logging.getLogger(__name__)

UNPINNED = "unpinned"
NOT_IN_ANSWER = frozenset({"context_sources"})
"""Spec fields left out of the cache key entirely: documentation of the spec, not settings."""
DETAIL_LIMIT = 2000
DEFAULT_POLICY = RunPolicy()
"""A run spec's defaults: the policy of an engine run outside any run (tests, benchmarks)."""


def weights_revision(spec: ModelSpec) -> str:
    weights = spec.weights
    if isinstance(weights, HubWeights) and weights.revision:
        return weights.revision
    return UNPINNED


def answer_spec(spec: ModelSpec) -> ModelSpec:
    """The spec without settings that cannot change an answer (time limits, API limits and prices), so
    tuning them never re-buys finished answers; failed samples are retried anyway."""
    neutral = spec.model_copy(update={"sample_timeout_s": None})
    weights = spec.weights
    if not isinstance(weights, ApiModel):
        return neutral
    api = weights.model_copy(update={"limits": ApiLimits(), "pricing": ApiPricing()})
    return neutral.model_copy(update={"weights": api})


def cache_key(spec: ModelSpec, sample: ModelInput, adapter_version: str) -> str:
    """Everything that can change an answer: spec, weights, prompt, images, decoding, the execution
    choices (an adapter's defaults included, a run's variant named), adapter code."""
    execution = execution_of(spec)
    return sha256_text(
        canonical_json(
            {
                "spec": spec_hash(answer_spec(spec), exclude=NOT_IN_ANSWER),
                "revision": weights_revision(spec),
                "task": sample.task,
                "mode": str(sample.mode),
                "sample_id": sample.sample_id,
                "prompt": sample.prompt_sha256,
                "images": list(sample.image_sha256),
                "generation": spec.generation.model_dump(mode="json"),
                "execution": execution.model_dump(mode="json") if execution else None,
                "adapter": adapter_version,
            }
        )
    )


def plan_batches(samples: Sequence[ModelInput], rule: BatchRule) -> list[list[ModelInput]]:
    """Official batching: group by the sample's image count (first-seen order), then chunk each group
    into ``max(batch_image // n_images, 1)`` samples, or 1 for the single-sample tasks."""
    groups: dict[int, list[ModelInput]] = {}
    for sample in samples:
        groups.setdefault(sample.n_images, []).append(sample)
    batches = []
    for n_images, group in groups.items():
        single = group[0].task in rule.single_sample_tasks
        size = 1 if single else max(rule.batch_image // max(n_images, 1), 1)
        batches += [group[i : i + size] for i in range(0, len(group), size)]
    return batches


def cost_usd(spec: ModelSpec, usage: TokenUsage) -> float | None:
    """Price of one answer from its token counts; None unless both prices and both counts are known."""
    weights = spec.weights
    if not isinstance(weights, ApiModel):
        return None
    price_in, price_out = weights.pricing.price_per_1k_input, weights.pricing.price_per_1k_output
    if None in (price_in, price_out, usage.input_tokens, usage.output_tokens):
        return None
    return (usage.input_tokens * price_in + usage.output_tokens * price_out) / 1000  # type: ignore[operator]


def check_image_input(spec: ModelSpec, samples: Sequence[ModelInput]) -> None:
    """A model fed combined pictures takes ``max_images`` of them (default 1); a sample with more must
    stop the job, never be answered from its first image only."""
    if spec.image_input is not ImageInput.COMBINED:
        return
    limit = spec.max_images or 1
    for sample in samples:
        if len(sample.images) > limit:
            raise AdapterError(
                f"model spec {spec.name!r} takes at most {limit} picture(s) per sample (image_input: "
                f"combined), but task {sample.task}, sample {sample.sample_id}, mode {sample.mode} has "
                f"{len(sample.images)} images; prepare it as combined pictures for this model"
            )


def load_done(
    path: Path, keys: dict[int, str], overflow: ContextOverflow = ContextOverflow.GENERATE
) -> dict[int, Prediction]:
    """Stored successful predictions whose key is current; stale or failed ones are dropped, and so, under
    ``refuse``, are answers generated past the window; lines that are not predictions are set aside
    (``journal``)."""
    if not path.exists():
        return {}
    refuse = overflow is ContextOverflow.REFUSE
    return {
        pred.sample_id: pred
        for pred in read_predictions(path)
        if pred.failure is None
        and keys.get(pred.sample_id) == pred.cache_key
        and not (refuse and pred.over_window is not None)
    }


@dataclass(frozen=True)
class InferSummary:
    total: int
    reused: int
    generated: int
    failed: int
    failures: dict[str, int] = field(default_factory=dict)
    """Failed samples per failure kind."""
    over_window: int = 0
    """Samples answered although their input exceeded the model's window (recorded in each prediction)."""

    @property
    def failure_rate(self) -> float:
        return self.failed / self.total if self.total else 0.0


def failed_prediction(
    model: str, sample: ModelInput, key: str, kind: FailureKind, detail: str, seconds: float
) -> Prediction:
    return Prediction(
        task=sample.task,
        mode=sample.mode,
        model=model,
        sample_id=sample.sample_id,
        response=None,
        failure=kind,
        failure_detail=detail[:DETAIL_LIMIT],
        cache_key=key,
        seconds=seconds,
    )


def over_image_limit(
    spec: ModelSpec, samples: Sequence[ModelInput], keys: dict[int, str], overflow: ContextOverflow
) -> list[Prediction]:
    """Under ``refuse``, samples with more images than the model accepts fail as context overflow
    without a call; under ``generate`` (as the official code) none is refused."""
    if overflow is not ContextOverflow.REFUSE:
        return []
    return [
        failed_prediction(
            spec.name,
            s,
            keys[s.sample_id],
            FailureKind.CONTEXT_OVERFLOW,
            f"{len(s.images)} images, model {spec.name!r} accepts at most {spec.max_images}",
            0.0,
        )
        for s in samples
        if images_over(spec, s)
    ]


def image_refusals(
    spec: ModelSpec, samples: Sequence[ModelInput], keys: dict[int, str], data_root: Path | None
) -> list[Prediction]:
    """Samples whose images are not the ones preprocessing hashed fail without a call."""
    if data_root is None:
        return []
    problems = changed_images(samples, data_root)
    for detail in problems.values():
        log.warning("%s: %s", spec.name, detail)
    return [
        failed_prediction(
            spec.name, s, keys[s.sample_id], FailureKind.ADAPTER_ERROR, problems[s.sample_id], 0.0
        )
        for s in samples
        if s.sample_id in problems
    ]


def failed_batch(
    model: str,
    batch: Sequence[ModelInput],
    keys: dict[int, str],
    kind: FailureKind,
    detail: str,
    seconds: float,
) -> list[Prediction]:
    log.warning("%s: batch of %d failed (%s): %s", model, len(batch), kind, detail[:DETAIL_LIMIT])
    return [failed_prediction(model, s, keys[s.sample_id], kind, detail, seconds) for s in batch]


def without_culprit(
    adapter: Adapter,
    spec: ModelSpec,
    batch: Sequence[ModelInput],
    keys: dict[int, str],
    failure: InputFailure,
    seconds: float,
) -> list[Prediction]:
    """The sample whose image could not be used fails alone; the rest of its batch is answered."""
    culprit = next((s for s in batch if s.sample_id == failure.sample_id), None)
    if culprit is None:
        return failed_batch(spec.name, batch, keys, failure.kind, failure.detail, seconds)
    log.warning("%s: %s", spec.name, failure.detail[:DETAIL_LIMIT])
    failed = failed_prediction(
        spec.name, culprit, keys[culprit.sample_id], failure.kind, failure.detail, seconds
    )
    rest = [s for s in batch if s is not culprit]
    return [failed, *(run_batch(adapter, spec, rest, keys) if rest else [])]


def run_batch(
    adapter: Adapter,
    spec: ModelSpec,
    batch: Sequence[ModelInput],
    keys: dict[int, str],
    inputs: Any = None,
) -> list[Prediction]:
    """Answers for one batch, from ``inputs`` already built when given. An exception in the adapter
    fails every sample of the batch, except out-of-memory, which halves the batch and retries each half
    (building the halves' inputs anew), and one sample's unusable image, which fails that sample only."""
    model = spec.name
    if isinstance(inputs, InputFailure):
        if inputs.sample_id is not None:
            return without_culprit(adapter, spec, batch, keys, inputs, 0.0)
        return failed_batch(model, batch, keys, inputs.kind, inputs.detail, 0.0)
    start = time.perf_counter()
    try:
        answers = adapter.generate(batch) if inputs is None else adapter.answer(batch, inputs)  # type: ignore[attr-defined]
        if len(answers) != len(batch):
            raise RuntimeError(f"adapter returned {len(answers)} answers for {len(batch)} samples")
        usage = adapter.last_usage() if isinstance(adapter, ReportsUsage) else []
    except Exception as err:
        kind = failure_kind(err)
        if kind is FailureKind.OOM:
            sys.modules["torch"].cuda.empty_cache()
            if len(batch) > 1:
                half = (len(batch) + 1) // 2
                log.warning(
                    "%s: out of memory on a batch of %d, retrying as %d + %d",
                    model,
                    len(batch),
                    half,
                    len(batch) - half,
                )
                return run_batch(adapter, spec, batch[:half], keys) + run_batch(
                    adapter, spec, batch[half:], keys
                )
        seconds = (time.perf_counter() - start) / len(batch)
        if isinstance(err, ImageError):
            return without_culprit(adapter, spec, batch, keys, input_failure(err), seconds)
        return failed_batch(model, batch, keys, kind, f"{type(err).__name__}: {err}", seconds)
    seconds = (time.perf_counter() - start) / len(batch)
    usage = usage if len(usage) == len(batch) else [TokenUsage(None, None)] * len(batch)
    predictions = []
    for s, answer, counts in zip(batch, answers, usage, strict=True):
        own_seconds = counts.seconds if counts.seconds is not None else seconds
        if isinstance(answer, SampleFailure):
            log.warning(
                "%s: sample %s/%d failed (%s): %s", model, s.task, s.sample_id, answer.kind, answer.detail
            )
            predictions.append(
                failed_prediction(model, s, keys[s.sample_id], answer.kind, answer.detail, own_seconds)
            )
            continue
        predictions.append(
            Prediction(
                task=s.task,
                mode=s.mode,
                model=model,
                sample_id=s.sample_id,
                response=answer,
                cache_key=keys[s.sample_id],
                seconds=own_seconds,
                input_tokens=counts.input_tokens,
                output_tokens=counts.output_tokens,
                batch_size=len(batch),
                cost_usd=cost_usd(spec, counts),
                over_window=window_excess(spec, s, counts.input_tokens),
            )
        )
    return predictions


def answered_batches(
    adapter: Adapter,
    spec: ModelSpec,
    batches: Sequence[Sequence[ModelInput]],
    keys: dict[int, str],
    input_workers: int,
    refused: list[Prediction],
) -> Iterator[list[Prediction]]:
    """The predictions of each batch as it finishes, after the samples refused without a call."""
    if refused:
        yield refused
    if isinstance(adapter, BuildsInputs) and worth_a_worker(input_workers, len(batches)):
        for batch, inputs in prefetched(batches, adapter.encode, input_workers):
            yield run_batch(adapter, spec, batch, keys, inputs)
        return
    for batch in batches:
        yield run_batch(adapter, spec, batch, keys)


def run_model(
    adapter: Adapter,
    spec: ModelSpec,
    samples: Sequence[ModelInput],
    out: Path,
    journal: Path | None = None,
    input_workers: int = 0,
    data_root: Path | None = None,
    policy: RunPolicy = DEFAULT_POLICY,
) -> InferSummary:
    """Answer every sample not already answered under its current key; write ``out`` when done.

    Answers are appended to ``journal`` (default: ``out`` itself) as each batch finishes. A workflow
    manager deletes a job's declared output before re-running it and after a failure, so the job passes a
    journal outside its outputs: finished answers then survive both and are never bought twice. A
    separate journal is left in finishing order: it holds exactly the current records, and only ``out``
    needs prepared order. ``input_workers`` processes build the next batches' inputs while the model
    generates, for adapters that keep input building apart (``BuildsInputs``). With ``data_root``, each
    image is checked against its prepared hash first (adapters that read images). ``policy`` is the job's,
    the value its adapter was built with: its ``context_overflow`` says whether an input past the model's
    window is answered or refused. Raises
    ``CellBusy`` while another job answers the same cell.
    """
    journal = journal or out
    ids = [s.sample_id for s in samples]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{out}: prepared samples repeat a sample_id")
    check_image_input(spec, samples)
    label = f"{spec.name} {samples[0].task} {samples[0].mode}" if samples else spec.name
    with cell_lock(journal, label):
        if isinstance(adapter, CountsCells):
            adapter.start_cell()
        summary = answer_cell(
            adapter, spec, samples, out, journal, input_workers, data_root, policy.context_overflow, label
        )
    log.info("%s -> %s: %s", spec.name, out, summary)
    return summary


def first_failures(label: str, failed: Sequence[Prediction]) -> AdapterError:
    """Why a cell stops when its first ``FIRST_FAILURES`` answered samples all failed: the rest would
    fail alike. What was answered stays in the journal."""
    first = failed[0]
    return AdapterError(
        f"{label}: the first {len(failed)} samples all failed, so the cell stops (first failure: "
        f"{first.failure} {(first.failure_detail or '')[:300]})"
    )


def answer_cell(
    adapter: Adapter,
    spec: ModelSpec,
    samples: Sequence[ModelInput],
    out: Path,
    journal: Path,
    input_workers: int,
    data_root: Path | None,
    overflow: ContextOverflow,
    label: str,
) -> InferSummary:
    """``run_model`` once the cell is locked."""
    ids = [s.sample_id for s in samples]
    keys = {s.sample_id: cache_key(spec, s, adapter.version) for s in samples}
    records: dict[int, Prediction] = {}
    for path in dict.fromkeys((out, journal)):
        records |= load_done(path, keys, overflow)
    reused = len(records)
    if records or journal.exists():
        # Start from a clean journal: no stale records, and no torn last line for the appends to join.
        atomic_write_jsonl(journal, (records[i].model_dump(mode="json") for i in ids if i in records))
    pending = [s for s in samples if s.sample_id not in records]
    failures: Counter[str] = Counter()
    too_many = over_image_limit(spec, pending, keys, overflow)
    over = {p.sample_id for p in too_many}
    refused = too_many + image_refusals(
        spec, [s for s in pending if s.sample_id not in over], keys, data_root
    )
    skipped = {p.sample_id for p in refused}
    batches = plan_batches([s for s in pending if s.sample_id not in skipped], spec.batch)
    succeeded, failed_first = False, []
    with Progress(label, len(pending)) as progress, JsonlAppender(journal) as appender:
        for predictions in answered_batches(adapter, spec, batches, keys, input_workers, refused):
            appender.append(pred.model_dump(mode="json") for pred in predictions)
            for pred in predictions:
                records[pred.sample_id] = pred
                if pred.failure is not None:
                    failures[pred.failure.value] += 1
            progress.update(len(predictions), sum(p.failure is not None for p in predictions))
            answered = [p for p in predictions if p.sample_id not in skipped]
            succeeded = succeeded or any(p.failure is None for p in answered)
            failed_first += [] if succeeded else answered
            if len(failed_first) >= FIRST_FAILURES:
                raise first_failures(label, failed_first)
    atomic_write_jsonl(out, (records[i].model_dump(mode="json") for i in ids))
    return InferSummary(
        total=len(samples),
        reused=reused,
        generated=len(pending),
        failed=sum(failures.values()),
        failures=dict(failures),
        over_window=sum(1 for i in ids if records[i].over_window is not None),
    )
