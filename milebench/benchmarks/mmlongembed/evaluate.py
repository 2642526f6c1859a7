"""Per-query metrics of one model, their macro and micro averages, and the length x depth grids.

The run's tie rule (``ties``) gives the per-query metrics the analyses read; the averages under every
rule are kept beside them, so the report shows what the rule changes, with the count of positives tied
with another candidate per subset (where the rules can differ at all).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from milebench.benchmarks.mmlongembed.metrics import (
    TIES,
    averages,
    group_means,
    mean,
    metric_names,
    query_metrics,
    tied_positives,
)
from milebench.benchmarks.mmlongembed.records import Qrel, Query
from milebench.benchmarks.mmlongembed.spec import EmbedRunSpec
from milebench.benchmarks.mmlongembed.task_spec import REAL_TASKS

SUBSET, BREAKDOWN = "subset ", "breakdown "
"""Key prefixes in ``averages`` (beside ``macro`` and ``micro``): a subset's means, a breakdown's."""


def grid(
    run: EmbedRunSpec, queries: Sequence[Query], values: Mapping[str, float]
) -> dict[str, list[list[float | None]]]:
    """Per Visual Grounding breakdown (needle modality / haystack modality): rows are depths, columns
    length bins, each cell the mean of ``values`` by query (real-task queries have no depth: left out)."""
    vg = run.visual_grounding
    queries = [q for q in queries if q.family not in REAL_TASKS and q.breakdown is not None]
    cells: dict[tuple[str | None, int, int], list[float]] = defaultdict(list)
    for q in queries:
        if q.id in values:
            cells[(q.breakdown, q.depth, q.bin)].append(values[q.id])
    splits = sorted({q.breakdown for q in queries if q.breakdown is not None})
    return {s: [[mean(cells[(s, d, b)]) for b in vg.bins] for d in vg.depths] for s in splits}


def with_breakdown(
    queries: Sequence[Query], per_query: Mapping[str, Mapping[str, float]], names: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    """``averages`` over the subsets, and the mean of each breakdown beside them."""
    rows = [(q.subset, per_query[q.id]) for q in queries]
    split = [(q.breakdown, per_query[q.id]) for q in queries if q.breakdown is not None]
    return {
        **averages(rows, names),
        **{f"{BREAKDOWN}{b}": v for b, v in group_means(split, names).items()},
    }


def tie_counts(queries: Sequence[Query], tied: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Per subset and per breakdown: ``tied`` positives (sharing their score with another candidate)."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"tied": 0, "queries": 0})
    for q in queries:
        for key in (f"{SUBSET}{q.subset}", *([f"{BREAKDOWN}{q.breakdown}"] if q.breakdown else [])):
            out[key]["tied"] += tied[q.id]
            out[key]["queries"] += 1
    return dict(sorted(out.items()))


def evaluate(
    run: EmbedRunSpec,
    queries: Sequence[Query],
    qrels: Sequence[Qrel],
    scores: Mapping[str, Mapping[str, float]],
    needle_seen: Mapping[str, float],
) -> dict[str, object]:
    """``needle_seen``: per query, 1 when the model read its needle whole (0 otherwise)."""
    judged: dict[str, dict[str, int]] = defaultdict(dict)
    for qrel in qrels:
        judged[qrel.query][qrel.candidate] = qrel.relevance
    names = metric_names(run.cutoffs)
    by_rule = {
        rule: {q.id: query_metrics(scores[q.id], judged[q.id], run.cutoffs, rule) for q in queries}
        for rule in TIES
    }
    per_query = by_rule[run.ties]
    hit = f"Hit@{run.heatmap_k}"
    return {
        "metrics": names,
        "ties": run.ties,
        "averages": with_breakdown(queries, per_query, names),
        "tie_rules": {
            rule: averages([(q.subset, m[q.id]) for q in queries], names) for rule, m in by_rule.items()
        },
        "tied_positives": tie_counts(
            queries, {q.id: tied_positives(scores[q.id], judged[q.id]) for q in queries}
        ),
        "heatmap_metric": hit,
        "heatmap": grid(run, queries, {q: m[hit] for q, m in per_query.items()}),
        "needle_seen": grid(run, queries, needle_seen),
        "bins": list(run.visual_grounding.bins),
        "depths": list(run.visual_grounding.depths),
        "queries": per_query,
    }
