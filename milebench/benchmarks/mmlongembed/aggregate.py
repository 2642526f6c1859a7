"""``embed-aggregate``: every analysis of a run and its verdict against the paper, in one JSON file.

The report only renders this file, so each number is computed once. The bootstrap draws 10,000
resamples (the paper's count) from a generator seeded with 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from milebench.benchmarks.mmlongembed.analysis import (
    METRIC,
    DepthMeans,
    EasyHard,
    Heatmap,
    InterferenceClass,
    ModelInterference,
    ModelPosition,
    ScaleComparison,
    depth_means,
    easy_hard,
    easy_hard_overall,
    heatmap,
    interference,
    interference_class,
    macro_interval,
    position,
    scale_comparisons,
    split,
)
from milebench.benchmarks.mmlongembed.evaluate import BREAKDOWN, SUBSET
from milebench.benchmarks.mmlongembed.paper import EmbedPaper
from milebench.benchmarks.mmlongembed.records import Query
from milebench.benchmarks.mmlongembed.spec import EmbedRunSpec, EmbedSpecs
from milebench.benchmarks.mmlongembed.statistics import CONFIDENCE, RESAMPLES
from milebench.benchmarks.mmlongembed.verdict import EmbedVerdict, OurAverage, Ours, build_verdict
from milebench.spec.base import Spec

SEED = 0


class Analysis(Spec):
    run: str
    metric: str
    resamples: int
    confidence: float
    seed: int
    scale: tuple[ScaleComparison, ...]
    position: tuple[ModelPosition, ...]
    depth_means: tuple[DepthMeans, ...]
    interference: tuple[ModelInterference, ...]
    interference_classes: tuple[InterferenceClass, ...]
    easy_hard: tuple[EasyHard, ...]
    easy_hard_overall: tuple[EasyHard, ...]
    heatmaps: tuple[Heatmap, ...]
    verdict: EmbedVerdict
    paper: EmbedPaper


def subset_scores(metrics: Mapping[str, Any], prefix: str = SUBSET) -> dict[str, float]:
    """The evaluate stage's P@1 (0-1) per subset, or per breakdown (``prefix``), by name."""
    averages = metrics["averages"]
    return {k.removeprefix(prefix): v[METRIC] for k, v in averages.items() if k.startswith(prefix)}


def build_analysis(
    run: EmbedRunSpec,
    specs: EmbedSpecs,
    paper: EmbedPaper,
    queries: Sequence[Query],
    metrics: Mapping[str, Mapping[str, Any]],
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Analysis:
    """``metrics``: per run model, the evaluate stage's output (per-query metrics and averages)."""
    per_query = {m: v["queries"] for m, v in metrics.items()}
    models = {m: specs.models[m] for m in run.models}
    scale = scale_comparisons(models, per_query, queries, resamples, seed)
    vg, real = split(queries)
    spreads = {m: interference(m, subset_scores(metrics[m], BREAKDOWN), vg) for m in run.models}
    averages = {}
    for m in run.models:
        low, high = macro_interval(per_query[m], queries, resamples, seed)
        macro = metrics[m]["averages"]["macro"][METRIC]
        averages[m] = OurAverage(
            value=100 * macro, subsets=len(subset_scores(metrics[m])), ci_low=low, ci_high=high
        )
    positions = [position(m, per_query[m], vg) for m in run.models]
    pools = [row for m in run.models for row in easy_hard(m, per_query[m], real)]
    depths = {m: depth_means(m, per_query[m], vg) for m in run.models}
    ours = Ours(
        averages=averages,
        scale=scale,
        interference=spreads,
        subsets={m: {k: 100 * v for k, v in subset_scores(metrics[m]).items()} for m in run.models},
        pools=pools,
        depths=depths,
        position=positions,
    )
    verdict = build_verdict(paper, ours, run.tolerance, CONFIDENCE, resamples, seed)
    return Analysis(
        run=run.name,
        metric=METRIC,
        resamples=resamples,
        confidence=CONFIDENCE,
        seed=seed,
        scale=tuple(scale),
        position=tuple(positions),
        depth_means=tuple(depths[m] for m in run.models),
        interference=tuple(spreads[m] for m in run.models),
        interference_classes=tuple(interference_class(spreads[m]) for m in run.models),
        easy_hard=tuple(pools),
        easy_hard_overall=tuple(r for m in run.models for r in easy_hard_overall(m, per_query[m], real)),
        heatmaps=tuple(heatmap(m, metrics[m]["heatmap_metric"], per_query[m], vg) for m in run.models),
        verdict=verdict,
        paper=paper,
    )
