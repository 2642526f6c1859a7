"""Needle-in-a-haystack grids (context length x needle depth) derived from the data itself.

The upstream needle files list 320 samples (32 context lengths x 10 depths) but carry no length or
depth field: a sample is only ``sample_id``, instruction id, context, images and answer. So the cells
are derived, and the derivation is stated in the figure caption:

- length: N-1 (text needle): words of the context, image placeholders left out; N-2 (image needle):
  the sample's image count. When more than 32 distinct lengths occur they are cut into 32 equal-width
  bins.
- depth: N-1: where the gold answer first occurs in the context (share of the context's words before
  it); N-2 (the answer is inside an image, so the text does not tell): the rank of the sample id
  among samples of the same length, on the assumption that the upstream grid lists a length's depths in
  order. Either position in [0, 1) falls into one of 10 depth bins. An N-1 sample whose answer is not in
  its context is placed by the same rank rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from milebench.benchmarks.milebench.paths import UNLIMITED_REGIME
from milebench.benchmarks.milebench.records import Judgment, PreparedSample
from milebench.benchmarks.milebench.report.evidence import Evidence
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import Group, TaskSpec
from milebench.infer.records import IMAGE_PLACEHOLDER
from milebench.score.registry import DEFAULT_SCORER
from milebench.spec.model import ModelSpec

N_LENGTHS, N_DEPTHS = 32, 10
TEXT_NEEDLE, IMAGE_NEEDLE = Group.N1, Group.N2
LENGTH_LABELS = {TEXT_NEEDLE: "context length (words)", IMAGE_NEEDLE: "context length (images)"}
DEPTH_RULES = {
    TEXT_NEEDLE: "depth: position of the answer in the context",
    IMAGE_NEEDLE: "depth: rank of the sample id among samples of the same image count (assumed grid order)",
}


@dataclass(frozen=True)
class NeedleGrid:
    """Mean score (x100) per depth bin (rows) and length bin (columns); None where no sample fell."""

    model: str
    display_name: str
    lengths: list[str]
    """Column labels: a length, or the range of a bin."""
    scores: list[list[float | None]]
    n_samples: int


def context_length(group: Group, sample: PreparedSample) -> int:
    if group is IMAGE_NEEDLE:
        return sample.n_images
    return len(sample.context.replace(IMAGE_PLACEHOLDER, " ").split())


def answer_position(sample: PreparedSample) -> float | None:
    """Share of the context's words before the first occurrence of the gold answer (case-insensitive)."""
    answer = sample.response.strip().lower()
    at = sample.context.lower().find(answer) if answer else -1
    if at < 0:
        return None
    return len(sample.context[:at].split()) / max(len(sample.context.split()), 1)


def depth_positions(
    group: Group, samples: Sequence[PreparedSample], lengths: dict[int, int]
) -> dict[int, float]:
    """sample id -> depth in [0, 1): measured for N-1 where possible, else by rank within its length."""
    by_length: dict[int, list[int]] = {}
    for s in samples:
        by_length.setdefault(lengths[s.sample_id], []).append(s.sample_id)
    rank = {}
    for ids in by_length.values():
        ordered = sorted(ids)
        rank.update({sid: i / len(ordered) for i, sid in enumerate(ordered)})
    positions = {}
    for s in samples:
        measured = answer_position(s) if group is TEXT_NEEDLE else None
        positions[s.sample_id] = rank[s.sample_id] if measured is None else measured
    return positions


def length_bins(values: Sequence[int]) -> tuple[list[str], dict[int, int]]:
    """Column labels and value -> column: one column per distinct length, or 32 equal-width bins."""
    distinct = sorted(set(values))
    if len(distinct) <= N_LENGTHS:
        return [str(v) for v in distinct], {v: i for i, v in enumerate(distinct)}
    low, high = distinct[0], distinct[-1]
    width = (high - low) / N_LENGTHS
    column = {v: min(int((v - low) / width), N_LENGTHS - 1) for v in distinct}
    labels = [f"{math.ceil(low + i * width)}-{math.floor(low + (i + 1) * width)}" for i in range(N_LENGTHS)]
    return labels, column


def needle_grid(
    group: Group,
    model: str,
    display_name: str,
    samples: Sequence[PreparedSample],
    judgments: Sequence[Judgment],
    scorer: str = "paper",
) -> NeedleGrid | None:
    """The grid of one model on one needle task; None when no sample of it was scored."""
    scored = {
        j.sample_id: j.score
        for j in judgments
        if j.scorer == scorer and j.status == "scored" and j.score is not None
    }
    known = [s for s in samples if s.sample_id in scored]
    if not known:
        return None
    lengths = {s.sample_id: context_length(group, s) for s in samples}
    labels, column = length_bins(list(lengths.values()))
    depth = depth_positions(group, samples, lengths)
    sums = [[0.0] * len(labels) for _ in range(N_DEPTHS)]
    counts = [[0] * len(labels) for _ in range(N_DEPTHS)]
    for s in known:
        row = min(int(depth[s.sample_id] * N_DEPTHS), N_DEPTHS - 1)
        col = column[lengths[s.sample_id]]
        sums[row][col] += scored[s.sample_id]
        counts[row][col] += 1
    scores = [
        [100 * total / n if n else None for total, n in zip(sums[r], counts[r], strict=True)]
        for r in range(N_DEPTHS)
    ]
    return NeedleGrid(model, display_name, labels, scores, len(known))


def needle_grids(task: TaskSpec, models: Sequence[ModelSpec], evidence: Evidence) -> list[NeedleGrid]:
    """Multi-image grids of every model with judgments on a needle task.

    Length and depth are properties of a sample, not of a model: they are measured on the unlimited
    regime's prepared samples (full contexts, as in the data), which the baselines always read. Without
    that file there is no figure, rather than one measured on contexts a model's budget cut.
    """
    samples = evidence.prepared(task.name, Mode.MULTI_IMAGE, UNLIMITED_REGIME)
    if samples is None:
        return []
    grids = []
    for model in models:
        judgments = evidence.judgments(model.name, task.name, Mode.MULTI_IMAGE)
        grid = needle_grid(
            task.group, model.name, model.display_name, samples, judgments or [], DEFAULT_SCORER
        )
        if grid is not None:
            grids.append(grid)
    return grids
