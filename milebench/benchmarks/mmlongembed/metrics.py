"""Retrieval metrics within each query's pool: tie-aware expected values, or trec_eval's tie order.

A candidate is relevant when its judgment is at least 1. P@1; Hit@k (success); Recall@k (relevant in the
top k over all relevant); MRR@k (1/rank of the first relevant within k, else 0); nDCG@k with linear gain
(the judgment, negative ones as 0) and a log2(rank + 1) discount, over the ideal ordering of the relevant
judgments cut at k. With one relevant candidate per query, P@1 = Hit@1 and Recall@k = Hit@k.

Two rules for candidates with the same score (``TIES``):

- ``expected`` (the default): each metric is its expectation over every ordering of each group of tied
  candidates, all orderings equally likely (McSherry and Najork, ECIR 2008), computed in closed form, so
  no metric depends on candidate names. A tied group at ranks s+1 ... s+n with r relevant of its n:
  every one of its positions holds each member with probability 1/n, so P@1, Recall@k and DCG@k (sums
  over positions) take the group's mean relevance or gain at each position; Hit@k is 1 minus the chance
  that no relevant candidate reaches the top k, a product over groups of C(n - r, m) / C(n, m) for the m
  positions of a group within k; MRR@k reads the first group with a relevant candidate, whose first
  relevant one is at its position j with probability C(n - j, r - 1) / C(n, r).
- ``trec_eval``: score descending, ties broken by candidate id descending (trec_eval sorts that way), so
  a tie goes to the larger name; every group is then one candidate and the same formulas are trec_eval's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import groupby
from typing import Literal

Ties = Literal["expected", "trec_eval"]
TIES: tuple[Ties, ...] = ("expected", "trec_eval")


def rank(scores: Mapping[str, float]) -> list[str]:
    """Candidate ids best first: score descending, then id descending (trec_eval's order)."""
    by_id = sorted(scores, reverse=True)
    return sorted(by_id, key=lambda cid: -scores[cid])


def tie_groups(scores: Mapping[str, float], ties: Ties) -> list[list[str]]:
    """Candidates best first in groups of equal score (``expected``) or one by one (``trec_eval``)."""
    ranking = rank(scores)
    if ties == "trec_eval":
        return [[cid] for cid in ranking]
    return [list(group) for _, group in groupby(ranking, key=lambda cid: scores[cid])]


def tied_positives(scores: Mapping[str, float], judgments: Mapping[str, int]) -> int:
    """Relevant candidates whose score another candidate of the pool shares: where the tie rule matters."""
    return sum(judgments.get(c, 0) >= 1 for g in tie_groups(scores, "expected") if len(g) > 1 for c in g)


def _discount(rank_: int) -> float:
    return 1 / math.log2(rank_ + 1)


def _none_in_top(n: int, relevant: int, taken: int) -> float:
    """Chance that none of ``relevant`` of ``n`` shuffled candidates is among the first ``taken``."""
    return math.comb(n - relevant, taken) / math.comb(n, taken)


def _expected_reciprocal_rank(start: int, n: int, relevant: int, cutoff: int) -> float:
    """E[1/rank of the first relevant, 0 beyond ``cutoff``] in a shuffled group at ranks start+1 ...
    start+n holding ``relevant`` relevant candidates."""
    total = math.comb(n, relevant)
    last = min(n - relevant + 1, cutoff - start)
    return math.fsum(math.comb(n - j, relevant - 1) / total / (start + j) for j in range(1, last + 1))


def query_metrics(
    scores: Mapping[str, float],
    judgments: Mapping[str, int],
    cutoffs: Sequence[int],
    ties: Ties = "expected",
) -> dict[str, float]:
    """``P@1`` and ``Hit@k``, ``Recall@k``, ``MRR@k``, ``nDCG@k`` for each k of ``cutoffs``."""
    groups = tie_groups(scores, ties)
    relevant = sorted((g for g in judgments.values() if g >= 1), reverse=True)
    starts = [0]
    for group in groups:
        starts.append(starts[-1] + len(group))
    hits_in = [sum(judgments.get(c, 0) >= 1 for c in g) for g in groups]
    gain_in = [math.fsum(max(judgments.get(c, 0), 0) for c in g) for g in groups]
    first = next((i for i, r in enumerate(hits_in) if r), None)
    out = {"P@1": hits_in[0] / len(groups[0]) if groups else 0.0}
    for k in cutoffs:
        within = [max(0, min(k - s, len(g))) for s, g in zip(starts, groups, strict=False)]
        found = math.fsum(r * m / len(g) for r, m, g in zip(hits_in, within, groups, strict=True))
        miss = math.prod(
            _none_in_top(len(g), r, m) for r, m, g in zip(hits_in, within, groups, strict=True) if m
        )
        out[f"Hit@{k}"] = 1.0 - miss
        out[f"Recall@{k}"] = found / len(relevant) if relevant else 0.0
        out[f"MRR@{k}"] = (
            0.0
            if first is None or starts[first] >= k
            else _expected_reciprocal_rank(starts[first], len(groups[first]), hits_in[first], k)
        )
        dcg = math.fsum(
            gain_in[i] / len(g) * _discount(starts[i] + j)
            for i, g in enumerate(groups)
            for j in range(1, within[i] + 1)
        )
        best = math.fsum(g * _discount(i + 1) for i, g in enumerate(relevant[:k]))
        out[f"nDCG@{k}"] = dcg / best if best else 0.0
    return out


def metric_names(cutoffs: Sequence[int]) -> list[str]:
    return ["P@1", *(f"{m}@{k}" for m in ("Hit", "Recall", "MRR", "nDCG") for k in cutoffs)]


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def group_means(
    rows: Sequence[tuple[str, Mapping[str, float]]], names: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    """Per group (rows are (group, metrics) per query), the mean of each metric, by group name."""
    by_group: dict[str, list[Mapping[str, float]]] = defaultdict(list)
    for group, metrics in rows:
        by_group[group].append(metrics)
    return {g: {n: mean([m[n] for m in ms]) for n in names} for g, ms in sorted(by_group.items())}


def averages(
    rows: Sequence[tuple[str, Mapping[str, float]]], names: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    """``micro``: mean over queries; ``macro``: mean over subsets of each subset's mean (rows are
    (subset, metrics) per query)."""
    micro = {n: mean([m[n] for _, m in rows]) for n in names}
    subset_means = group_means(rows, names)
    macro = {n: mean([x for v in subset_means.values() if (x := v[n]) is not None]) for n in names}
    return {"micro": micro, "macro": macro, **{f"subset {s}": v for s, v in subset_means.items()}}
