"""Retrieval metrics: the trec_eval rule equals pytrec_eval on random pools with tied scores and graded
judgments; the default tie rule gives each metric's expectation over every order of the tied candidates
(known values, and the mean over all orders enumerated), whatever the candidates are named."""

from __future__ import annotations

import itertools
import math
import random
import string

import pytest
import pytrec_eval

from milebench.benchmarks.mmlongembed.metrics import (
    averages,
    metric_names,
    query_metrics,
    rank,
    tie_groups,
    tied_positives,
)

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
        ours, theirs = query_metrics(scores, qrels[q], CUTOFFS, "trec_eval"), reference[q]
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


def renamed(
    scores: dict[str, float], judged: dict[str, int], rng: random.Random
) -> tuple[dict[str, float], dict[str, int]]:
    names = {c: "".join(rng.choices(string.ascii_lowercase, k=8)) + str(i) for i, c in enumerate(scores)}
    return {names[c]: s for c, s in scores.items()}, {names[c]: j for c, j in judged.items()}


@pytest.mark.parametrize("seed", range(5))
def test_renamed_candidates_give_the_same_default_metrics(seed: int) -> None:
    run, qrels = random_run(seed)
    rng = random.Random(seed)
    for q, scores in run.items():
        again = renamed(scores, qrels[q], rng)
        assert query_metrics(*again, CUTOFFS) == query_metrics(scores, qrels[q], CUTOFFS), q


def test_the_trec_eval_rule_gives_a_tie_to_the_larger_name_the_default_to_neither() -> None:
    # "q-positive" sorts above "q-hard-1", "q-a-positive" below it
    for positive, p_at_1 in (("q-positive", 1.0), ("q-a-positive", 0.0)):
        scores = {positive: 0.7, "q-hard-1": 0.7, "q-easy": 0.1}
        assert query_metrics(scores, {positive: 1}, CUTOFFS, "trec_eval")["P@1"] == p_at_1
        assert query_metrics(scores, {positive: 1}, CUTOFFS)["P@1"] == 0.5


def test_positive_tied_with_one_negative_at_the_top() -> None:
    m = query_metrics({"p": 0.9, "n": 0.9, "x": 0.1}, {"p": 1}, (1, 2, 3))
    assert m["P@1"] == m["Hit@1"] == m["Recall@1"] == m["nDCG@1"] == 0.5
    assert m["Hit@2"] == m["Recall@2"] == 1.0
    assert m["MRR@1"] == 0.5 and m["MRR@2"] == m["MRR@3"] == pytest.approx((1 + 1 / 2) / 2)
    assert m["nDCG@2"] == pytest.approx((1 + 1 / math.log2(3)) / 2)


def test_positive_tied_below_the_top() -> None:
    # one negative above, then the positive tied with two negatives at ranks 2 to 4
    m = query_metrics({"a": 0.9, "p": 0.5, "b": 0.5, "c": 0.5, "d": 0.1}, {"p": 1}, (1, 2, 3, 5))
    assert m["P@1"] == 0.0 and m["MRR@1"] == 0.0
    assert m["Hit@2"] == pytest.approx(1 / 3) and m["Hit@3"] == pytest.approx(2 / 3) and m["Hit@5"] == 1.0
    assert m["MRR@5"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert m["MRR@3"] == pytest.approx((1 / 2 + 1 / 3) / 3)


def test_two_positives_tied_with_two_negatives() -> None:
    m = query_metrics({"p": 1.0, "q": 1.0, "a": 1.0, "b": 1.0}, {"p": 1, "q": 1}, (1, 2, 4))
    assert m["P@1"] == 0.5 and m["Hit@1"] == 0.5
    assert m["Hit@2"] == pytest.approx(1 - 1 / 6)  # both negatives on top: 1 of the 6 pairs of places
    assert m["Recall@2"] == pytest.approx(0.5) and m["Recall@4"] == 1.0
    assert m["MRR@4"] == pytest.approx(3 / 6 + 2 / 6 / 2 + 1 / 6 / 3)


def all_orders(scores: dict[str, float]) -> list[dict[str, float]]:
    """Every strict ranking the ties allow, as scores without ties (all equally likely)."""
    groups = tie_groups(scores, "expected")
    out = []
    for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
        flat = [c for order in orders for c in order]
        out.append({c: float(len(flat) - i) for i, c in enumerate(flat)})
    return out


@pytest.mark.parametrize("seed", range(4))
def test_default_metrics_are_the_mean_over_every_order_of_the_ties(seed: int) -> None:
    rng = random.Random(seed)
    names = metric_names(CUTOFFS)
    checked = 0
    for q in range(30):
        pool = [f"d{i}" for i in range(rng.randrange(2, 8))]
        scores = {d: rng.randrange(3) / 2 for d in pool}
        judged = {d: rng.choice([0, 1, 1, 2]) for d in rng.sample(pool, rng.randrange(1, len(pool) + 1))}
        orders = all_orders(scores)
        ours = query_metrics(scores, judged, CUTOFFS)
        for name in names:
            exact = math.fsum(query_metrics(o, judged, CUTOFFS, "trec_eval")[name] for o in orders) / len(
                orders
            )
            assert ours[name] == pytest.approx(exact, abs=1e-12), (q, name)
        checked += len(orders) > 1
    assert checked > 10  # most pools have ties


def test_tied_positives_count_relevant_candidates_sharing_a_score() -> None:
    assert tied_positives({"p": 0.5, "n": 0.5, "x": 0.9}, {"p": 1}) == 1
    assert tied_positives({"p": 0.6, "n": 0.5, "x": 0.5}, {"p": 1}) == 0
    assert tied_positives({"p": 0.5, "q": 0.5}, {"p": 1, "q": 2}) == 2
