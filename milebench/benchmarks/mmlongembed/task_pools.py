"""A real-task dataset built into the track's set format: Easy and Hard pools at each length pool.

Every candidate of length pool L is exactly L tokens by the counting rule: its document padded with
unrelated text (``task_build.pad``; a document longer than the smallest pool is refused). Each query has
one positive, its own padded document. Hard negatives are the same document with part replaced by
length-matched text, then padded with the very same padding, so they match the positive token for token
outside the replaced part:

- Multi-Source Reasoning: the first, the last or a seeded middle evidence span replaced by unrelated
  prose (the paper: coherent text); the padding goes between blocks cut at the evidence spans, so each
  span keeps its relative position.
- Logical Summarization: the first 25%, middle 50% or last 25% replaced; page-image documents take
  unseen consecutive pages of the same document (``spare_pages``; text tops up the last few tokens),
  text documents take text of the dataset's other documents in a seeded order (the paper retrieves
  look-alikes with BM25; not done here). Padding follows the document.
- Temporal Summarization: the 1 fps frames with their event segments reversed, and block-permuted by a
  seeded order that is neither the original nor the reversal (needs three segments). Padding text
  follows the last frame.

Easy negatives are other queries' positives at the same length, drawn by seed; a Hard pool holds the
query's Hard negatives and Easy negatives up to the same C/Q. In the track's records (``records``) a
real-task query's ``subset`` is ``<task>/<dataset>/<easy|hard>`` (the unit of the macro average),
``bin`` its length pool, ``depth`` 0, ``interference`` its difficulty, ``family`` the task and
``entity`` the user's query id; a candidate's ``interference`` names its construction (``positive``,
``hard-first`` ...), ``needle_segment`` its first evidence segment (0 without evidence) and
``realised_depth`` that segment's share of the candidate. ``evidence.jsonl`` adds, per candidate, the
source query, the evidence segments and the replaced segment range.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from milebench.benchmarks.mmlongembed.records import (
    CANDIDATES,
    POOLS,
    QRELS,
    Candidate,
    ImageSegment,
    Pool,
    Qrel,
    Query,
    TextSegment,
)
from milebench.benchmarks.mmlongembed.task_build import (
    Filler,
    Segment,
    blocks,
    filler,
    pad,
    permuted_order,
    reorder,
    reversed_order,
    summary_region,
    video_segments,
)
from milebench.benchmarks.mmlongembed.task_inputs import Source
from milebench.benchmarks.mmlongembed.task_kinds import Task
from milebench.benchmarks.mmlongembed.task_spec import RealTask
from milebench.preprocess.tokenizer import HFTokenizer
from milebench.record_files import RecordError
from milebench.spec.base import Spec

EVIDENCE = "evidence.jsonl"
DIFFICULTIES = ("easy", "hard")


class Construction(Spec):
    """How a candidate was made: ``evidence`` and ``replaced`` are segment indices in the candidate."""

    candidate: str
    source: str
    construction: str
    evidence: tuple[int, ...] = ()
    replaced: tuple[int, int] | None = None


@dataclass
class TaskSet:
    queries: list[Query] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    pools: list[Pool] = field(default_factory=list)
    qrels: list[Qrel] = field(default_factory=list)
    constructions: list[Construction] = field(default_factory=list)


@dataclass(frozen=True)
class Variant:
    """A document before padding: its blocks, which blocks are evidence, and the replaced segments as
    (block, start, end) within that block."""

    name: str
    parts: list[list[Segment]]
    evidence: tuple[int, ...] = ()
    replaced: tuple[int, int, int] | None = None


def _reasoning(source: Source, fill: Filler, rng: random.Random) -> list[Variant]:
    parts = blocks(source.segments, source.evidence)
    marked = set(source.evidence)
    ev, at = [], 0
    for b, part in enumerate(parts):
        if at in marked:
            ev.append(b)
        at += len(part)
    spans = {"first": ev[0], "last": ev[-1]}
    if len(ev) >= 3:
        spans["middle"] = rng.choice(ev[1:-1])
    out = [Variant("positive", parts, tuple(ev))]
    for name, b in spans.items():
        new: list[Segment] = [*fill.take(sum(s.tokens for s in parts[b]))]
        swapped = [*parts[:b], new, *parts[b + 1 :]]
        out.append(Variant(f"hard-{name}", swapped, tuple(e for e in ev if e != b), (b, 0, len(new))))
    return out


def _pages(spare: Sequence[ImageSegment], tokens: int, fill: Filler) -> list[Segment]:
    """Consecutive spare pages from the first while they fit, then text to exactly ``tokens``."""
    pages: list[Segment] = []
    for page in spare:
        if page.tokens > tokens:
            break
        pages.append(page)
        tokens -= page.tokens
    return [*pages, *fill.take(tokens)]


def _summary(source: Source, fill: Filler) -> list[Variant]:
    segments = list(source.segments)
    out = [Variant("positive", [segments])]
    for region in ("first", "middle", "last"):
        try:
            start, end = summary_region(segments, region)
        except RecordError as err:
            raise RecordError(f"{source.where}: {err}") from None
        tokens = sum(s.tokens for s in segments[start:end])
        pages = source.spare and all(isinstance(s, ImageSegment) for s in segments[start:end])
        new = _pages(source.spare, tokens, fill) if pages else fill.take(tokens)
        swapped = [*segments[:start], *new, *segments[end:]]
        out.append(Variant(f"hard-{region}", [swapped], replaced=(0, start, start + len(new))))
    return out


def _video(source: Source, rng: random.Random) -> list[Variant]:
    frames = list(source.segments)
    count = len(video_segments(len(frames), source.events))
    out = [
        Variant("positive", [frames]),
        Variant("hard-reverse", [reorder(frames, source.events, reversed_order(count))]),
    ]
    order = permuted_order(count, rng)
    if order is not None:
        out.append(Variant("hard-permute", [reorder(frames, source.events, order)]))
    return out


def variants(
    spec: RealTask,
    source: Source,
    others: Sequence[Source],
    padding: Sequence[TextSegment],
    tokenizer: HFTokenizer,
) -> list[Variant]:
    """The positive and the Hard negatives of one source, before padding."""
    rng = random.Random(f"{spec.seed}/{spec.dataset}/{source.id}/hard")
    if spec.task is Task.MULTI_SOURCE_REASONING:
        return _reasoning(source, filler(padding, tokenizer, rng), rng)
    if spec.task is Task.LOGICAL_SUMMARIZATION:
        documents = rng.sample(list(others), len(others))  # each document's text kept in its order
        pieces = [s for o in documents for s in o.segments if isinstance(s, TextSegment)] or list(padding)
        return _summary(source, Filler(pieces, tokenizer))
    return _video(source, rng)


def candidate_id(spec: RealTask, length: int, source: str, variant: str) -> str:
    return f"{spec.task.value}-{spec.dataset}-{length:05d}-{source}-{variant}"


def _candidate(
    spec: RealTask, length: int, source: Source, variant: Variant, fill: Filler
) -> tuple[Candidate, Construction]:
    segments, starts = pad(variant.parts, length, fill)
    evidence = tuple(starts[b] for b in variant.evidence)
    replaced = None
    if variant.replaced is not None:
        block, start, end = variant.replaced
        replaced = (starts[block] + start, starts[block] + end)
    first = evidence[0] if evidence else 0
    share = sum(s.tokens for s in segments[:first]) / length if evidence else 0.0
    cid = candidate_id(spec, length, source.id, variant.name)
    candidate = Candidate(
        id=cid,
        segments=tuple(segments),
        length=sum(s.tokens for s in segments),
        bin=length,
        depth=round(share * 100),
        realised_depth=share,
        needle_segment=first,
        interference=variant.name,
    )
    return candidate, Construction(
        candidate=cid, source=source.id, construction=variant.name, evidence=evidence, replaced=replaced
    )


def build(
    spec: RealTask,
    sources: Sequence[Source],
    padding: Sequence[TextSegment],
    tokenizer: HFTokenizer,
    path: Path,
) -> TaskSet:
    """Every length pool of the dataset read from ``path`` (named in errors with the query)."""
    smallest = min(spec.bins)
    for source in sources:
        if source.length > smallest:
            raise RecordError(
                f"{source.where}: the document is {source.length} tokens, longer than the smallest"
                f" length pool ({smallest})"
            )
    if len(sources) < spec.candidates:
        raise RecordError(
            f"{path}: {len(sources)} queries; {spec.candidates} candidates per query need at least"
            f" {spec.candidates} documents"
        )
    made = {s.id: variants(spec, s, [o for o in sources if o is not s], padding, tokenizer) for s in sources}
    for source in sources:
        hard = len(made[source.id]) - 1
        if hard > spec.candidates - 1:
            raise RecordError(
                f"{source.where}: {hard} Hard negatives do not fit {spec.candidates} candidates per query"
            )
    out = TaskSet()
    for length in spec.bins:
        for source in sources:
            for variant in made[source.id]:
                rng = random.Random(f"{spec.seed}/{spec.dataset}/{source.id}/{length}/padding")
                candidate, construction = _candidate(
                    spec, length, source, variant, filler(padding, tokenizer, rng)
                )
                out.candidates.append(candidate)
                out.constructions.append(construction)
        for source in sources:
            _queries(spec, length, source, made[source.id], [o.id for o in sources if o is not source], out)
    return out


def _queries(
    spec: RealTask, length: int, source: Source, made: Sequence[Variant], others: Sequence[str], out: TaskSet
) -> None:
    positive = candidate_id(spec, length, source.id, "positive")
    image = any(isinstance(s, ImageSegment) for s in source.segments)
    for difficulty in DIFFICULTIES:
        qid = f"q-{spec.task.value}-{spec.dataset}-{length:05d}-{difficulty}-{source.id}"
        hard = (
            [candidate_id(spec, length, source.id, v.name) for v in made[1:]] if difficulty == "hard" else []
        )
        rng = random.Random(f"{spec.seed}/{spec.dataset}/{source.id}/{length}/{difficulty}")
        easy = [
            candidate_id(spec, length, o, "positive")
            for o in rng.sample(list(others), spec.candidates - 1 - len(hard))
        ]
        out.queries.append(
            Query(
                id=qid,
                text=source.query,
                subset=f"{spec.task.value}/{spec.dataset}/{difficulty}",
                bin=length,
                depth=0,
                needle_modality="image" if image else "text",
                interference=difficulty,
                family=spec.task.value,
                entity=source.id,
            )
        )
        out.pools.append(Pool(query=qid, candidates=(positive, *hard, *easy)))
        out.qrels.append(Qrel(query=qid, candidate=positive, relevance=1))


def validate(spec: RealTask, taskset: TaskSet, folder: Path) -> None:
    """The pools' rules, each error naming the set's file and the query: exactly one positive per
    query, in its pool; the same C/Q in every pool of every length; every candidate of a pool exactly
    the pool's length (so Hard candidates are as long as Easy ones)."""
    candidates = {c.id: c for c in taskset.candidates}
    positives: dict[str, list[str]] = {q.id: [] for q in taskset.queries}
    for qrel in taskset.qrels:
        if qrel.relevance >= 1:
            positives.setdefault(qrel.query, []).append(qrel.candidate)
    pools = {p.query: p for p in taskset.pools}
    for query in taskset.queries:
        pool = pools.get(query.id)
        if pool is None:
            raise RecordError(f"{folder / POOLS}: query {query.id} has no pool")
        found = positives[query.id]
        if len(found) != 1 or found[0] not in pool.candidates:
            raise RecordError(
                f"{folder / QRELS}: query {query.id}: {len(found)} positives"
                f"{'' if len(found) != 1 else ' (not in its pool)'}; exactly one in its pool expected"
            )
        if len(pool.candidates) != spec.candidates:
            raise RecordError(
                f"{folder / POOLS}: query {query.id}: {len(pool.candidates)} candidates; every pool of"
                f" {spec.task.value} holds {spec.candidates} (C/Q)"
            )
        for cid in pool.candidates:
            c = candidates.get(cid)
            if c is None:
                raise RecordError(f"{folder / POOLS}: query {query.id}: candidate {cid} not in {CANDIDATES}")
            real = sum(s.tokens for s in c.segments)
            if real != c.length or c.length != query.bin:
                raise RecordError(
                    f"{folder / CANDIDATES}: candidate {cid} (pool of query {query.id}): {real} tokens;"
                    f" every candidate of the {query.bin}-token pool is exactly that long"
                )
