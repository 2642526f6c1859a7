"""Run an adapter over prepared samples: official batching, per-sample cache keys, crash-safe resume.

Each finished batch is appended (fsync'd) to the predictions file at once, so a killed job loses at most
the batch in flight. A rerun skips every sample whose stored answer has the current cache key; failed
samples are retried. At the end the file is rewritten with current records only, in prepared order.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from milebench.infer.adapter import Adapter, ReportsUsage, TokenUsage
from milebench.io import append_jsonl, atomic_write_jsonl, canonical_json, read_jsonl, sha256_text
from milebench.records import FailureKind, Prediction, PreparedSample
from milebench.spec.model import BatchRule, HubWeights, ModelSpec
from milebench.spec.registry import spec_hash

log = logging.getLogger(__name__)

UNPINNED = "unpinned"
DETAIL_LIMIT = 2000


def weights_revision(spec: ModelSpec) -> str:
    weights = spec.weights
    if isinstance(weights, HubWeights) and weights.revision:
        return weights.revision
    return UNPINNED


def cache_key(spec: ModelSpec, sample: PreparedSample, adapter_version: str) -> str:
    """Everything that can change an answer: spec, weights, prompt, images, decoding, adapter code."""
    return sha256_text(
        canonical_json(
            {
                "spec": spec_hash(spec),
                "revision": weights_revision(spec),
                "task": sample.task,
                "mode": sample.mode.value,
                "sample_id": sample.sample_id,
                "prompt": sample.prompt_sha256,
                "images": list(sample.image_sha256),
                "generation": spec.generation.model_dump(mode="json"),
                "adapter": adapter_version,
            }
        )
    )


def plan_batches(samples: Sequence[PreparedSample], rule: BatchRule) -> list[list[PreparedSample]]:
    """Official batching: group by the sample's image count (first-seen order), then chunk each group
    into ``max(batch_image // n_images, 1)`` samples, or 1 for the single-sample tasks."""
    groups: dict[int, list[PreparedSample]] = {}
    for sample in samples:
        groups.setdefault(sample.n_images, []).append(sample)
    batches = []
    for n_images, group in groups.items():
        single = group[0].task in rule.single_sample_tasks
        size = 1 if single else max(rule.batch_image // max(n_images, 1), 1)
        batches += [group[i : i + size] for i in range(0, len(group), size)]
    return batches


def failure_kind(err: Exception) -> FailureKind:
    """OOM when torch says so; torch is looked up, not imported, so torch-free adapters stay light."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(err, torch.cuda.OutOfMemoryError):
        return FailureKind.OOM
    return FailureKind.ADAPTER_ERROR


def load_done(path: Path, keys: dict[int, str]) -> dict[int, Prediction]:
    """Stored successful predictions whose key is current; stale, failed or unreadable ones are dropped."""
    if not path.exists():
        return {}
    done: dict[int, Prediction] = {}
    for line, row in enumerate(read_jsonl(path), start=1):
        try:
            pred = Prediction.model_validate(row)
        except ValidationError as err:
            log.warning("%s: line %d is not a prediction, ignored: %s", path, line, err)
            continue
        if pred.failure is None and keys.get(pred.sample_id) == pred.cache_key:
            done[pred.sample_id] = pred
    return done


@dataclass(frozen=True)
class InferSummary:
    total: int
    reused: int
    generated: int
    failed: int


def run_batch(
    adapter: Adapter, model: str, batch: Sequence[PreparedSample], keys: dict[int, str]
) -> list[Prediction]:
    """Answers for one batch; an exception in the adapter fails every sample of the batch."""
    start = time.perf_counter()
    try:
        answers = adapter.generate(batch)
        if len(answers) != len(batch):
            raise RuntimeError(f"adapter returned {len(answers)} answers for {len(batch)} samples")
        usage = adapter.last_usage() if isinstance(adapter, ReportsUsage) else []
    except Exception as err:
        kind = failure_kind(err)
        if kind is FailureKind.OOM:
            sys.modules["torch"].cuda.empty_cache()
        seconds = (time.perf_counter() - start) / len(batch)
        detail = f"{type(err).__name__}: {err}"[:DETAIL_LIMIT]
        log.warning("%s: batch of %d failed (%s): %s", model, len(batch), kind, detail)
        return [
            Prediction(
                task=s.task,
                mode=s.mode,
                model=model,
                sample_id=s.sample_id,
                response=None,
                failure=kind,
                failure_detail=detail,
                cache_key=keys[s.sample_id],
                seconds=seconds,
            )
            for s in batch
        ]
    seconds = (time.perf_counter() - start) / len(batch)
    usage = usage if len(usage) == len(batch) else [TokenUsage(None, None)] * len(batch)
    return [
        Prediction(
            task=s.task,
            mode=s.mode,
            model=model,
            sample_id=s.sample_id,
            response=answer,
            cache_key=keys[s.sample_id],
            seconds=seconds,
            input_tokens=counts.input_tokens,
            output_tokens=counts.output_tokens,
        )
        for s, answer, counts in zip(batch, answers, usage, strict=True)
    ]


def run_model(
    adapter: Adapter, spec: ModelSpec, samples: Sequence[PreparedSample], out: Path
) -> InferSummary:
    """Answer every sample not already answered under its current key, writing ``out`` as it goes."""
    ids = [s.sample_id for s in samples]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{out}: prepared samples repeat a sample_id")
    keys = {s.sample_id: cache_key(spec, s, adapter.version) for s in samples}
    records = load_done(out, keys)
    reused = len(records)
    # Start from a clean file: no stale records, and no torn last line for the appends to join.
    atomic_write_jsonl(out, (records[i].model_dump(mode="json") for i in ids if i in records))
    pending = [s for s in samples if s.sample_id not in records]
    failed = 0
    for batch in plan_batches(pending, spec.batch):
        for pred in run_batch(adapter, spec.name, batch, keys):
            append_jsonl(out, pred.model_dump(mode="json"))
            records[pred.sample_id] = pred
            failed += pred.failure is not None
    atomic_write_jsonl(out, (records[i].model_dump(mode="json") for i in ids))
    summary = InferSummary(total=len(samples), reused=reused, generated=len(pending), failed=failed)
    log.info("%s -> %s: %s", spec.name, out, summary)
    return summary
