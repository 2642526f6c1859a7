"""Scoring rules stated as facts: one-sided punctuation, a ROUGE-L pair with a decimal, known intervals.

Each test pins a number a wrong implementation would change: the binomial quantiles of a bootstrap, a
permutation p-value that can be counted by hand, the boundary of the verdict's tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
from mini_specs import MINI_TASKS
from test_paper_scorer import make_sample, make_task

from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.score.aggregate import Denominator, LevelScore, VariantScore, summarise
from milebench.benchmarks.milebench.score.choice import extract_choice, option_key, option_map
from milebench.benchmarks.milebench.score.normalize import normalize
from milebench.benchmarks.milebench.score.paper import ScoringError, judge
from milebench.benchmarks.milebench.score.rouge_l import rouge_l_f
from milebench.benchmarks.milebench.score.standard import judge as standard_judge
from milebench.benchmarks.milebench.score.uncertainty import (
    TaskSamples,
    _interval,
    bootstrap_table,
    compare,
    task_samples,
)
from milebench.benchmarks.milebench.spec.run import Mode

TASKS = list(MINI_TASKS)


def samples(scores: list[float], start: int = 0) -> TaskSamples:
    ids = tuple(range(start, start + len(scores)))
    return TaskSamples(ids=ids, scores=np.array(scores), n_expected=len(scores), n_scored=len(scores))


# --- normalisation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A mark with a space on its left only, or on its right only, is deleted everywhere in the text.
        ("well-known -ish", "wellknown ish"),
        ("well-known- ish", "wellknown ish"),
        ("(a)b (c", "a b c"),  # each mark on its own: "(" is spaced, ")" is not
        ("a)b) c", "ab c"),
        # With no space beside it anywhere, every occurrence becomes a space.
        ("well-known", "well known"),
        ("x/y/z", "x y z"),
    ],
)
def test_a_mark_spaced_on_one_side_is_deleted_everywhere(text: str, expected: str) -> None:
    assert normalize(text) == expected


# --- ROUGE-L -----------------------------------------------------------------------------------------


def test_rouge_l_reads_the_prediction_as_the_hypothesis() -> None:
    """``rouge`` 1.0.1 splits at every '.', so "2.5" is two sentences, and counts distinct words.

    Prediction "dogs 5 or 2.5" (sentences "dogs 5 or 2" and "5"), gold "5 dogs": the gold's two words
    are each found in some prediction sentence (union LCS 2), so R = 2/2, P = 2/4, F = 2/3. With the
    roles swapped the gold is the hypothesis: only one word is new to the union, F = 1/3.
    """
    prediction, gold = normalize("Dogs, 5 or 2.5"), normalize("5 dogs")
    assert (prediction, gold) == ("dogs 5 or 2.5", "5 dogs")
    assert rouge_l_f(prediction, gold) == pytest.approx(2 / 3, abs=1e-6)
    assert rouge_l_f(gold, prediction) == pytest.approx(1 / 3, abs=1e-6)


# --- bootstrap intervals -----------------------------------------------------------------------------

HALF = [1.0] * 20 + [0.0] * 20
"""40 samples, 20 right: a bootstrap mean is Binomial(40, 1/2) / 40. Its 2.5% and 97.5% quantiles are
14 and 26 (P(X <= 13) = 1.9%, P(X <= 14) = 4.0%), its 5% and 95% quantiles 15 and 25 (P(X <= 15) =
7.7%), so with enough resamples the percentile interval is exact whatever the seed."""


@pytest.mark.parametrize(("confidence", "interval"), [(0.95, (35.0, 65.0)), (0.90, (37.5, 62.5))])
@pytest.mark.parametrize("seed", [0, 7])
def test_task_interval_is_the_binomial_percentile_interval(
    confidence: float, interval: tuple[float, float], seed: int
) -> None:
    table = bootstrap_table({"SlideVQA": samples(HALF)}, TASKS, 20_000, seed, confidence)
    estimate = table["SlideVQA"]
    assert (estimate.value, estimate.low, estimate.high) == (50.0, *interval)
    # S-2 has SlideVQA alone in the mini task list: the group repeats the task's interval.
    assert table["S-2"] == estimate


def test_the_default_confidence_is_95_percent() -> None:
    estimate = bootstrap_table({"SlideVQA": samples(HALF)}, TASKS, resamples=20_000)["SlideVQA"]
    assert (estimate.low, estimate.high) == (35.0, 65.0)


def test_paired_interval_is_the_percentile_interval_of_the_differences() -> None:
    """A right and B wrong on 20 samples, both right on 20: the differences are HALF."""
    a = {"SlideVQA": samples([1.0] * 40)}
    b = {"SlideVQA": samples(HALF[20:] + [1.0] * 20)}
    row = next(r for r in compare(a, b, TASKS, resamples=20_000) if r.column == "SlideVQA")
    assert (row.difference, row.low, row.high, row.n_pairs) == (50.0, 35.0, 65.0, 40)


def test_permutation_p_value_counts_flips_as_extreme_as_observed() -> None:
    """Four pairs, A right and B wrong on each: a sign flip is as extreme only when all four signs agree,
    2 of 16 equally likely patterns, so p = (1 + 2/16 R) / (1 + R) for R resamples."""
    a, b = {"SlideVQA": samples([1.0] * 4)}, {"SlideVQA": samples([0.0] * 4)}
    row = next(r for r in compare(a, b, TASKS, resamples=40_000, seed=3) if r.column == "SlideVQA")
    assert row.difference == 100.0
    assert row.p_value == pytest.approx(0.125, abs=0.005)


def test_a_flip_is_extreme_only_when_its_mean_reaches_the_observed_one() -> None:
    """Differences 1, 1, 1, 1 and 0.004: observed mean 0.8008. Flipping only the small one gives 0.7992,
    less extreme, so again only 2 of the 32 sign patterns count: p = 1/16."""
    a, b = {"SlideVQA": samples([1.0] * 4 + [0.504])}, {"SlideVQA": samples([0.0] * 4 + [0.5])}
    row = next(r for r in compare(a, b, TASKS, resamples=40_000, seed=3) if r.column == "SlideVQA")
    assert row.difference == pytest.approx(80.08)
    assert row.p_value == pytest.approx(1 / 16, abs=0.004)


def test_compare_defaults_to_5000_resamples_seeded_0() -> None:
    """30 pairs, A right and B wrong on each: no flip is as extreme (2 patterns in 2^30), p = 1 / 5001."""
    a, b = {"SlideVQA": samples([1.0] * 30)}, {"SlideVQA": samples([0.0] * 30)}
    assert next(r for r in compare(a, b, TASKS) if r.column == "SlideVQA").p_value == 1 / 5001
    # On noisy pairs the draws show: the default is seed 0, not any other.
    rng = np.random.default_rng(0)
    a, b = {"SlideVQA": samples(list(rng.integers(0, 2, 30) * 1.0))}, {"SlideVQA": samples([0.5] * 30)}
    assert compare(a, b, TASKS) == compare(a, b, TASKS, resamples=5000, seed=0)
    assert compare(a, b, TASKS) != compare(a, b, TASKS, resamples=5000, seed=1)


def test_a_task_scored_on_one_side_only_is_not_compared() -> None:
    a = {"SlideVQA": samples([1.0] * 4), "ActionSequence": samples([1.0] * 4)}
    b = {"SlideVQA": samples([0.0] * 4)}
    rows = {r.column: r for r in compare(a, b, TASKS, resamples=100)}
    assert rows["SlideVQA"].n_pairs == 4
    assert (rows["ActionSequence"].difference, rows["ActionSequence"].n_pairs) == (None, 0)
    assert (rows["T-1"].difference, rows["T-1"].p_value, rows["T-1"].n_pairs) == (None, None, 0)


# --- sample rules ------------------------------------------------------------------------------------


def test_a_two_character_key_is_read_whole_before_letters_are_collected() -> None:
    """Past 78 options the official keys leave the alphabet: option 81 is "B^". A prediction "b^" is that
    key (step 4 of the extraction); collecting the letters that are keys (step 5) would give "B"."""
    options = option_map([f"item {i}" for i in range(90)])
    assert option_key(81) == "B^"
    assert extract_choice(normalize("B^"), options) == "B^"
    assert extract_choice("b", options) == "B"


def test_a_failed_or_missing_judgment_scores_zero_even_if_it_carries_a_score() -> None:
    """The status decides: only a scored judgment keeps its score; the others count 0 under the official
    denominator and are left out of the scored-only one."""

    def row(i: int, status: str, score: float | None) -> Judgment:
        return Judgment(task="t", mode=Mode.MULTI_IMAGE, model="m", sample_id=i, scorer="paper",
                        status=status, score=score, image_quantity_level="Few")  # fmt: skip

    rows = [row(0, "scored", 1.0), row(1, "failed", 1.0), row(2, "missing", 1.0), row(3, "scored", 0.0)]
    found = task_samples(rows)  # the paper scorer and the official denominator by default
    assert (found.ids, found.scores.tolist(), found.n_expected, found.n_scored) == (
        (0, 1, 2, 3),
        [1.0, 0.0, 0.0, 0.0],
        4,
        2,
    )
    only = task_samples(rows, denominator=Denominator.SCORED_ONLY)
    assert (only.ids, only.scores.tolist(), only.n_expected, only.n_scored) == ((0, 3), [1.0, 0.0], 4, 2)
    summary = summarise("t", "m", Mode.MULTI_IMAGE, "paper", rows)
    assert (summary.score, summary.scored_only, summary.n_scored) == (25.0, 50.0, 2)
    assert summary.levels["Few"] == LevelScore(score=25.0, n=4, n_scored=2)


def test_a_scorer_difference_needs_both_scores() -> None:
    base = summarise("t", "m", Mode.MULTI_IMAGE, "paper", [])
    unscored = VariantScore(scorer="standard", score=None, n_scored=0, levels={})
    assert (
        base.model_copy(update={"score": 40.0, "variants": {"standard": unscored}}).difference("standard")
        is None
    )
    scored = unscored.model_copy(update={"score": 55.0})
    assert base.model_copy(update={"variants": {"standard": scored}}).difference("standard") is None
    both = base.model_copy(update={"score": 40.0, "variants": {"standard": scored}})
    assert both.difference("standard") == 15.0


def test_a_task_with_one_sample_has_a_point_interval_and_one_with_none_has_no_value() -> None:
    table = bootstrap_table({"SlideVQA": samples([1.0]), "ActionSequence": samples([])}, TASKS, resamples=50)
    assert (table["SlideVQA"].value, table["SlideVQA"].low, table["SlideVQA"].high) == (100.0, 100.0, 100.0)
    assert (table["ActionSequence"].value, table["ActionSequence"].low) == (None, None)


def test_bootstrap_defaults_to_2000_resamples_seeded_0() -> None:
    data = {"SlideVQA": samples(list(np.random.default_rng(0).random(50)))}
    assert bootstrap_table(data, TASKS) == bootstrap_table(data, TASKS, 2000, 0, 0.95)
    assert bootstrap_table(data, TASKS) != bootstrap_table(data, TASKS, 2000, 1, 0.95)  # the seed shows
    assert bootstrap_table(data, TASKS) != bootstrap_table(data, TASKS, 2001, 0, 0.95)  # so does the count


def test_an_interval_runs_between_the_percentiles_that_leave_equal_tails() -> None:
    """Replicates 0, 1, ..., 100: the p-th percentile is p itself."""
    assert _interval(np.arange(101.0), 0.95) == pytest.approx((2.5, 97.5))
    assert _interval(np.arange(101.0), 0.5) == pytest.approx((25.0, 75.0))


def test_scoring_errors_name_task_sample_and_cause() -> None:
    choice_task, rouge_task = make_task("ActionSequence", "multi-choice"), make_task("WebQA", "open-ended")
    with pytest.raises(ScoringError) as err:
        judge(choice_task, make_sample("ActionSequence", "kiwi", ["apple"]), "A")
    assert str(err.value) == (
        "task ActionSequence sample 0: gold answer 'kiwi' is not one of its choices after normalisation"
    )
    with pytest.raises(ScoringError) as err:
        judge(choice_task, make_sample("ActionSequence", "kiwi", []), "A")
    assert str(err.value) == "task ActionSequence sample 0: multi-choice sample has no choices"
    with pytest.raises(ScoringError) as err:
        judge(rouge_task, make_sample("WebQA", "!?"), "anything")
    assert str(err.value) == "task WebQA sample 0: gold answer is empty after normalisation"
    with pytest.raises(ScoringError) as err:
        standard_judge(choice_task, make_sample("ActionSequence", "kiwi", ["apple"]), "A")
    assert str(err.value) == "task ActionSequence sample 0: gold answer 'kiwi' is not one of its choices"
    with pytest.raises(ScoringError) as err:
        standard_judge(choice_task, make_sample("ActionSequence", "kiwi", []), "A")
    assert str(err.value) == "task ActionSequence sample 0: multi-choice sample has no choices"
