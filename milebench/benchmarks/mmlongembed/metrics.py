"""Retrieval metrics within each query's pool, by trec_eval's conventions.

Ranking: score descending, ties broken by candidate id descending (trec_eval sorts that way). A candidate
is relevant when its judgment is at least 1. P@1; Hit@k (success); Recall@k (relevant in the top k over
all relevant); MRR@k (1/rank of the first relevant within k, else 0); nDCG@k with linear gain (the
judgment) and a log2(rank + 1) discount, over the ideal ordering of the judgments cut at k. With one
relevant candidate per query, P@1 = Hit@1 and Recall@k = Hit@k.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence


def rank(scores: Mapping[str, float]) -> list[str]:
    """Candidate ids best first: score descending, then id descending."""
    by_id = sorted(scores, reverse=True)
    return sorted(by_id, key=lambda cid: -scores[cid])


def _dcg(gains: Sequence[int]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def query_metrics(
    scores: Mapping[str, float], judgments: Mapping[str, int], cutoffs: Sequence[int]
) -> dict[str, float]:
    """``P@1`` and ``Hit@k``, ``Recall@k``, ``MRR@k``, ``nDCG@k`` for each k of ``cutoffs``."""
    ranking = rank(scores)
    gains = [judgments.get(cid, 0) for cid in ranking]
    relevant = [g for g in judgments.values() if g >= 1]
    first = next((i + 1 for i, g in enumerate(gains) if g >= 1), None)
    ideal = sorted(relevant, reverse=True)
    out = {"P@1": float(gains[0] >= 1) if gains else 0.0}
    for k in cutoffs:
        hits = sum(g >= 1 for g in gains[:k])
        out[f"Hit@{k}"] = float(hits > 0)
        out[f"Recall@{k}"] = hits / len(relevant) if relevant else 0.0
        out[f"MRR@{k}"] = 1 / first if first is not None and first <= k else 0.0
        best = _dcg(ideal[:k])
        out[f"nDCG@{k}"] = _dcg([max(g, 0) for g in gains[:k]]) / best if best else 0.0
    return out


def metric_names(cutoffs: Sequence[int]) -> list[str]:
    return ["P@1", *(f"{m}@{k}" for m in ("Hit", "Recall", "MRR", "nDCG") for k in cutoffs)]


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def averages(
    rows: Sequence[tuple[str, Mapping[str, float]]], names: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    """``micro``: mean over queries; ``macro``: mean over subsets of each subset's mean (rows are
    (subset, metrics) per query)."""
    by_subset: dict[str, list[Mapping[str, float]]] = defaultdict(list)
    for subset, metrics in rows:
        by_subset[subset].append(metrics)
    micro = {n: mean([m[n] for _, m in rows]) for n in names}
    subset_means = {s: {n: mean([m[n] for m in ms]) for n in names} for s, ms in by_subset.items()}
    macro = {n: mean([x for v in subset_means.values() if (x := v[n]) is not None]) for n in names}
    return {"micro": micro, "macro": macro, **{f"subset {s}": v for s, v in sorted(subset_means.items())}}
