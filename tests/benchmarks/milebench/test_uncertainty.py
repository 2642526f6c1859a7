"""Bootstrap intervals follow the paper's aggregation and its denominator; paired comparisons use only
shared samples."""

from __future__ import annotations

import numpy as np
import pytest
from mini_specs import MINI_TASKS
from scipy.stats import bootstrap

from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.score.aggregate import OVERALL_DIAG, OVERALL_REAL, Denominator
from milebench.benchmarks.milebench.score.uncertainty import (
    TaskSamples,
    bootstrap_table,
    compare,
    point_columns,
    task_samples,
)
from milebench.benchmarks.milebench.spec.run import Mode

TASKS = list(MINI_TASKS)


def samples(scores: list[float], start: int = 0) -> TaskSamples:
    return TaskSamples(
        ids=tuple(range(start, start + len(scores))),
        scores=np.array(scores, dtype=float),
        n_expected=len(scores),
        n_scored=len(scores),
    )


def full(scores_by_task: dict[str, list[float]]) -> dict[str, TaskSamples]:
    return {name: samples(s) for name, s in scores_by_task.items()}


ALL = {t.name: [1.0, 0.0, 1.0, 1.0, 0.0, 0.5] for t in TASKS}


def test_values_follow_the_paper_aggregation_and_intervals_contain_them() -> None:
    data = {**ALL, "ActionSequence": [1.0, 1.0, 1.0, 0.0]}
    table = bootstrap_table(full(data), TASKS, resamples=500, seed=3)
    assert table["ActionSequence"].value == pytest.approx(75.0)
    assert table["T-1"].value == pytest.approx(75.0)
    # Groups without a task in the list have no value, so the overall columns are undefined here.
    assert table["T-2"].value is None and table[OVERALL_REAL].value is None
    # N-1, N-2 and I-1 each have their one task: the diagnostic overall is their plain mean.
    assert table[OVERALL_DIAG].value == pytest.approx(100 * np.mean(ALL["GPR1200"]))
    for column in ("ActionSequence", "T-1", "S-3", OVERALL_DIAG):
        estimate = table[column]
        assert estimate.low <= estimate.value <= estimate.high
        assert estimate.low < estimate.high


def test_constant_scores_have_a_degenerate_interval() -> None:
    table = bootstrap_table(full({"ActionSequence": [1.0] * 10}), TASKS, resamples=200)
    assert (table["ActionSequence"].low, table["ActionSequence"].high) == (100.0, 100.0)


def test_seeded_and_independent_of_other_tasks() -> None:
    varied = {t.name: list(np.random.default_rng(i).random(50)) for i, t in enumerate(TASKS)}
    one = bootstrap_table(full({"SlideVQA": varied["SlideVQA"]}), TASKS, resamples=300, seed=7)
    two = bootstrap_table(full(varied), TASKS, resamples=300, seed=7)
    other = bootstrap_table(full(varied), TASKS, resamples=300, seed=8)
    assert one["SlideVQA"] == two["SlideVQA"]
    assert two["SlideVQA"] != other["SlideVQA"]


def test_task_interval_agrees_with_scipy_percentile_bootstrap() -> None:
    rng = np.random.default_rng(0)
    scores = (rng.random(200) < 0.4).astype(float)
    ours = bootstrap_table({"SlideVQA": samples(list(scores))}, TASKS, resamples=4000, seed=1)["SlideVQA"]
    ref = bootstrap((scores,), np.mean, n_resamples=4000, method="percentile", random_state=2)
    assert ours.low == pytest.approx(100 * ref.confidence_interval.low, abs=1.5)
    assert ours.high == pytest.approx(100 * ref.confidence_interval.high, abs=1.5)


def test_point_columns_equal_bootstrap_values() -> None:
    points = point_columns(full(ALL), TASKS)
    table = bootstrap_table(full(ALL), TASKS, resamples=10)
    assert points == {column: estimate.value for column, estimate in table.items()}


def row(i: int, scorer: str, status: str, score: float | None) -> Judgment:
    return Judgment(task="SlideVQA", mode=Mode.MULTI_IMAGE, model="m", sample_id=i, scorer=scorer,
                    status=status, score=score, image_quantity_level="Few")  # fmt: skip


def test_task_samples_count_a_failed_row_as_zero_unless_scored_only_is_asked() -> None:
    rows = [
        row(0, "paper", "scored", 1.0),
        row(1, "paper", "failed", None),
        row(2, "paper", "missing", None),
        row(0, "standard", "scored", 0.0),
    ]
    found = task_samples(rows, "paper")
    assert (found.ids, found.scores.tolist()) == ((0, 1, 2), [1.0, 0.0, 0.0])
    assert (found.n_expected, found.n_scored) == (3, 1)
    only = task_samples(rows, "paper", Denominator.SCORED_ONLY)
    assert (only.ids, only.scores.tolist(), only.n_expected, only.n_scored) == ((0,), [1.0], 3, 1)


def test_intervals_resample_the_official_denominator() -> None:
    """3 correct of 4 expected, one failed: the value is 75.0 and its interval comes from [1, 1, 1, 0], so it
    is not the degenerate [100, 100] of the three scored samples."""
    rows = [row(i, "paper", "scored", 1.0) for i in range(3)] + [row(3, "paper", "failed", None)]
    official = bootstrap_table({"SlideVQA": task_samples(rows)}, TASKS, resamples=500, seed=0)["SlideVQA"]
    assert official.value == pytest.approx(75.0)
    assert official.low is not None and official.low < 75.0 <= official.high == 100.0
    only = task_samples(rows, "paper", Denominator.SCORED_ONLY)
    scored_only = bootstrap_table({"SlideVQA": only}, TASKS, resamples=500, seed=0)["SlideVQA"]
    assert (scored_only.value, scored_only.low, scored_only.high) == (100.0, 100.0, 100.0)


def test_identical_sides_differ_by_nothing() -> None:
    rows = {r.column: r for r in compare(full(ALL), full(ALL), TASKS, resamples=200)}
    assert rows["ActionSequence"].difference == 0.0
    assert rows["ActionSequence"].p_value == 1.0
    assert rows[OVERALL_DIAG].n_pairs == 18


def test_a_clear_difference_is_significant_and_uses_shared_samples_only() -> None:
    a = {"SlideVQA": samples([1.0] * 40)}
    # B answered samples 10..49; only ids 10..39 are shared, where A is right and B wrong.
    b = {"SlideVQA": samples([0.0] * 40, start=10)}
    rows = {r.column: r for r in compare(a, b, TASKS, resamples=999, seed=0)}
    result = rows["SlideVQA"]
    assert result.difference == pytest.approx(100.0)
    assert result.n_pairs == 30
    assert result.p_value == pytest.approx(1 / 1000)
    assert (result.low, result.high) == (100.0, 100.0)
    assert rows["S-2"].difference == pytest.approx(100.0)  # the mini list has one S-2 task
    assert rows[OVERALL_REAL].difference is None  # other realistic groups have no pairs


def test_no_difference_on_noise_is_not_significant() -> None:
    rng = np.random.default_rng(5)
    a = {"SlideVQA": samples(list((rng.random(300) < 0.5).astype(float)))}
    b = {"SlideVQA": samples(list((rng.random(300) < 0.5).astype(float)))}
    result = {r.column: r for r in compare(a, b, TASKS, resamples=2000, seed=1)}["SlideVQA"]
    # A is right on 160 of the 300 samples, B on 165: the difference is -5/3 points.
    assert (a["SlideVQA"].scores.sum(), b["SlideVQA"].scores.sum()) == (160.0, 165.0)
    assert result.difference == pytest.approx(-5 / 3)
    assert result.p_value > 0.05
    assert result.low < 0 < result.high  # no difference is inside the interval
