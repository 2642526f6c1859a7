"""The paper's analyses of one run, computed once from the per-query metrics (``embed-aggregate``).

- Model scale: within each model family of the run (the model specs' ``family``), the largest ``scale``
  against the smallest (ties broken by name), a paired test on query-level P@1 over every query.
The first two tests read every query; position bias and interference read the Visual Grounding queries,
Easy vs Hard the real-task ones.

- Position bias: per model, the mixed model of query P@1 on depth (as levels, and quadratic) with the
  length bin as levels and a random intercept per needle instance (needle modality, family and entity:
  the same needle across lengths, depths and haystacks).
- Modality interference: per model, P@1 under each haystack modality (the mean of its needle modalities'
  breakdown cells, so text and image needles weigh equally, as in the macro average), mean and sample SD.
- Depth means (the paper's Table 9): per model, the Visual Grounding P@1 at each needle depth.
- Easy vs Hard pools (the paper's Figure 4): per model, task and length pool, P@1 of the Easy and of the
  Hard queries; a run without real tasks has none, and its report says so.

Scores are in points (x100); the tests' statistics (t, p, d, chi2) are as computed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from scipy import stats

from milebench.benchmarks.mmlongembed.records import Query
from milebench.benchmarks.mmlongembed.spec import Lineage
from milebench.benchmarks.mmlongembed.statistics import (
    CONFIDENCE,
    RESAMPLES,
    DepthEffects,
    PairedTest,
    Spread,
    depth_effects,
    paired_test,
    spread,
)
from milebench.benchmarks.mmlongembed.task_pools import DIFFICULTIES
from milebench.benchmarks.mmlongembed.task_spec import REAL_TASKS
from milebench.spec.base import Spec

METRIC = "P@1"
OVERALL = "overall"

QueryScores = Mapping[str, Mapping[str, float]]
"""Per query id, its metrics (the evaluate stage's ``queries``)."""


class ScaleComparison(Spec):
    """Larger minus smaller member of a family; the test in P@1 units (x100 in the report)."""

    family: str
    larger: str
    smaller: str
    larger_scale: float
    smaller_scale: float
    test: PairedTest


class ModelPosition(Spec):
    model: str
    effects: DepthEffects


class DepthMeans(Spec):
    """One model's Visual Grounding P@1 (x100) per needle depth (the paper's Table 9 row)."""

    model: str
    means: dict[int, float]


class ModelInterference(Spec):
    model: str
    spread: Spread


ROBUST_SD = 5.0
"""Points of SD below which a model is modality-robust: the paper's robust model has 2.29, its biased
ones 6 to 13."""


class InterferenceClass(Spec):
    """The paper's Table 4 classes as the kit reads them: ``cross-modal`` where the mixed haystacks score
    below both single-modality ones, else ``robust`` with an SD under ``ROBUST_SD``, else ``biased``;
    ``None`` without all three modalities."""

    model: str
    interference_class: Literal["robust", "biased", "cross-modal"] | None


class Heatmap(Spec):
    """One model's Visual Grounding metric (x100) per depth (rows) and length bin (columns), every
    query of the cell (the paper's Figure 3 panel)."""

    model: str
    metric: str
    bins: tuple[int, ...]
    depths: tuple[int, ...]
    grid: tuple[tuple[float | None, ...], ...]


class EasyHard(Spec):
    """One model's P@1 (x100) in one task's Easy and Hard pools at one length; ``None``: no query."""

    model: str
    task: str
    bin: int
    easy: float | None
    hard: float | None
    n_easy: int
    n_hard: int


def split(queries: Sequence[Query]) -> tuple[list[Query], list[Query]]:
    """(Visual Grounding queries, real-task queries): a real-task query's ``family`` is its task."""
    real = [q for q in queries if q.family in REAL_TASKS]
    return [q for q in queries if q.family not in REAL_TASKS], real


def easy_hard(model: str, scores: QueryScores, real: Sequence[Query]) -> list[EasyHard]:
    """Per task and length pool, in task then length order."""
    cells: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: {d: [] for d in DIFFICULTIES})
    for q in real:
        cells[(q.family, q.bin)][q.interference].append(scores[q.id][METRIC])
    rows = []
    for (task, length), by in sorted(cells.items()):
        easy, hard = by["easy"], by["hard"]
        rows.append(
            EasyHard(
                model=model,
                task=task,
                bin=length,
                easy=100 * float(np.mean(easy)) if easy else None,
                hard=100 * float(np.mean(hard)) if hard else None,
                n_easy=len(easy),
                n_hard=len(hard),
            )
        )
    return rows


def scale_pairs(models: Mapping[str, Lineage]) -> list[tuple[str, str, str]]:
    """(family, larger, smaller) for each family with at least two scales among ``models``."""
    families: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for name, spec in models.items():
        if spec.family is not None and spec.scale is not None:
            families[spec.family].append((spec.scale, name))
    pairs = []
    for family, members in sorted(families.items()):
        ordered = sorted(members)
        (small, smaller), (large, larger) = ordered[0], ordered[-1]
        if large > small:
            pairs.append((family, larger, smaller))
    return pairs


def scale_comparisons(
    models: Mapping[str, Lineage],
    scores: Mapping[str, QueryScores],
    queries: Sequence[Query],
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> list[ScaleComparison]:
    out = []
    for family, larger, smaller in scale_pairs(models):
        a = [scores[larger][q.id][METRIC] for q in queries]
        b = [scores[smaller][q.id][METRIC] for q in queries]
        larger_scale, smaller_scale = models[larger].scale, models[smaller].scale
        assert larger_scale is not None and smaller_scale is not None  # scale_pairs keeps scaled models
        out.append(
            ScaleComparison(
                family=family,
                larger=larger,
                smaller=smaller,
                larger_scale=larger_scale,
                smaller_scale=smaller_scale,
                test=paired_test(a, b, resamples, seed),
            )
        )
    return out


def needle_instance(query: Query) -> str:
    return f"{query.needle_modality}/{query.family}/{query.entity}"


def position(model: str, scores: QueryScores, queries: Sequence[Query]) -> ModelPosition:
    effects = depth_effects(
        [scores[q.id][METRIC] for q in queries],
        [q.depth for q in queries],
        [q.bin for q in queries],
        [needle_instance(q) for q in queries],
    )
    return ModelPosition(model=model, effects=effects)


def depth_means(model: str, scores: QueryScores, queries: Sequence[Query]) -> DepthMeans:
    by: dict[int, list[float]] = defaultdict(list)
    for q in queries:
        by[q.depth].append(scores[q.id][METRIC])
    return DepthMeans(model=model, means={d: 100 * float(np.mean(v)) for d, v in sorted(by.items())})


def interference_class(m: ModelInterference) -> InterferenceClass:
    scores = m.spread.scores
    if not {"text", "image", "mixed"} <= set(scores) or m.spread.sd is None:
        return InterferenceClass(model=m.model, interference_class=None)
    if scores["mixed"] < min(scores["text"], scores["image"]):
        return InterferenceClass(model=m.model, interference_class="cross-modal")
    return InterferenceClass(
        model=m.model, interference_class="robust" if m.spread.sd < ROBUST_SD else "biased"
    )


def heatmap(model: str, metric: str, scores: QueryScores, queries: Sequence[Query]) -> Heatmap:
    cells: dict[tuple[int, int], list[float]] = defaultdict(list)
    for q in queries:
        cells[(q.depth, q.bin)].append(scores[q.id][metric])
    bins, depths = sorted({q.bin for q in queries}), sorted({q.depth for q in queries})
    grid = tuple(
        tuple(100 * float(np.mean(cells[(d, b)])) if cells[(d, b)] else None for b in bins) for d in depths
    )
    return Heatmap(model=model, metric=metric, bins=tuple(bins), depths=tuple(depths), grid=grid)


def easy_hard_overall(model: str, scores: QueryScores, real: Sequence[Query]) -> list[EasyHard]:
    """Per length pool, every real task together (Figure 4's overall panel): task ``overall``."""
    pooled = [q.model_copy(update={"family": OVERALL}) for q in real]
    return easy_hard(model, scores, pooled)


def interference(model: str, splits: Mapping[str, float], queries: Sequence[Query]) -> ModelInterference:
    """``splits``: the evaluate stage's P@1 per breakdown (0-1, needle modality / haystack modality);
    each haystack modality the mean of its needle modalities'."""
    members: dict[str, set[str]] = defaultdict(set)
    for q in queries:
        if q.breakdown is not None:
            members[q.interference].add(q.breakdown)
    by_modality = {
        modality: 100 * float(np.mean([splits[s] for s in sorted(names)]))
        for modality, names in sorted(members.items())
    }
    return ModelInterference(model=model, spread=spread(by_modality))


def _macro(*subsets: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean([s.mean(axis=axis) for s in subsets], axis=0)


def macro_interval(
    scores: QueryScores,
    queries: Sequence[Query],
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> tuple[float | None, float | None]:
    """Bootstrap interval (x100) of the macro P@1, each subset's queries resampled on their own;
    ``None`` where no subset's scores vary."""
    by_subset: dict[str, list[float]] = defaultdict(list)
    for q in queries:
        by_subset[q.subset].append(scores[q.id][METRIC])
    samples = [np.asarray(v) for _, v in sorted(by_subset.items())]
    if not any(np.ptp(s) > 0 for s in samples):
        return None, None
    boot = stats.bootstrap(
        samples,
        _macro,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        batch=1000,
        rng=np.random.default_rng(seed),
    )
    return 100 * float(boot.confidence_interval.low), 100 * float(boot.confidence_interval.high)
