"""Per-query metrics of one model, their macro and micro averages, and the length x depth grids."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from milebench.benchmarks.mmlongembed.metrics import averages, mean, metric_names, query_metrics
from milebench.benchmarks.mmlongembed.records import Qrel, Query
from milebench.benchmarks.mmlongembed.spec import EmbedRunSpec
from milebench.benchmarks.mmlongembed.task_spec import REAL_TASKS


def grid(
    run: EmbedRunSpec, queries: Sequence[Query], values: Mapping[str, float]
) -> dict[str, list[list[float | None]]]:
    """Per Visual Grounding subset: rows are depths, columns length bins, each cell the mean of ``values``
    by query (real-task queries have no depth: they are left out)."""
    vg = run.visual_grounding
    queries = [q for q in queries if q.family not in REAL_TASKS]
    cells: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for q in queries:
        if q.id in values:
            cells[(q.subset, q.depth, q.bin)].append(values[q.id])
    subsets = sorted({q.subset for q in queries})
    return {s: [[mean(cells[(s, d, b)]) for b in vg.bins] for d in vg.depths] for s in subsets}


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
    per_query = {q.id: query_metrics(scores[q.id], judged[q.id], run.cutoffs) for q in queries}
    hit = f"Hit@{run.heatmap_k}"
    return {
        "metrics": names,
        "averages": averages([(q.subset, per_query[q.id]) for q in queries], names),
        "heatmap_metric": hit,
        "heatmap": grid(run, queries, {q: m[hit] for q, m in per_query.items()}),
        "needle_seen": grid(run, queries, needle_seen),
        "bins": list(run.visual_grounding.bins),
        "depths": list(run.visual_grounding.depths),
        "queries": per_query,
    }
