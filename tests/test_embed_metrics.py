"""Retrieval metrics equal pytrec_eval's (trec_eval) on random pools with tied scores and graded judgments."""

from __future__ import annotations

import random

import pytest
import pytrec_eval

from milebench.benchmarks.mmlongembed.metrics import averages, query_metrics, rank

CUTOFFS = (1, 5, 10)


def random_run(seed: int) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, int]]]:
    rng = random.Random(seed)
    run, qrels = {}, {}
    for q in range(40):
        pool = [f"d{rng.randrange(1000):03d}" for _ in range(rng.randrange(3, 30))]
        pool = sorted(set(pool))
        # Scores on a coarse grid so ties are common.
        run[f"q{q}"] = {d: rng.randrange(4) / 4 for d in pool}
        judged = rng.sample(pool, rng.randrange(1, min(4, len(pool)) + 1))
        qrels[f"q{q}"] = {d: rng.choice([1, 1, 2]) for d in judged}
        qrels[f"q{q}"].update({d: 0 for d in pool if d not in judged and rng.random() < 0.2})
    return run, qrels


@pytest.mark.parametrize("seed", range(5))
def test_metrics_equal_trec_eval(seed: int) -> None:
    run, qrels = random_run(seed)
    measures = {
        "P_1",
        "recip_rank",
        *(f"{m}_{k}" for m in ("success", "recall", "ndcg_cut") for k in CUTOFFS),
    }
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    for q, scores in run.items():
        ours, theirs = query_metrics(scores, qrels[q], CUTOFFS), reference[q]
        assert ours["P@1"] == pytest.approx(theirs["P_1"])
        for k in CUTOFFS:
            assert ours[f"Hit@{k}"] == pytest.approx(theirs[f"success_{k}"]), (q, k)
            assert ours[f"Recall@{k}"] == pytest.approx(theirs[f"recall_{k}"]), (q, k)
            assert ours[f"nDCG@{k}"] == pytest.approx(theirs[f"ndcg_cut_{k}"]), (q, k)
            rr = theirs["recip_rank"]
            assert ours[f"MRR@{k}"] == pytest.approx(rr if rr and round(1 / rr) <= k else 0.0), (q, k)


def test_ties_go_to_the_larger_id() -> None:
    assert rank({"a": 0.5, "c": 0.5, "b": 0.9}) == ["b", "c", "a"]


def test_macro_weighs_subsets_equally_micro_weighs_queries() -> None:
    rows = [("s1", {"P@1": 1.0}), ("s1", {"P@1": 1.0}), ("s1", {"P@1": 1.0}), ("s2", {"P@1": 0.0})]
    result = averages(rows, ["P@1"])
    assert result["micro"]["P@1"] == 0.75 and result["macro"]["P@1"] == 0.5
