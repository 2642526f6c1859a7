"""The paper's statistics against known values: scipy's paired t-test, Cohen's d = mean(diff) / sd(diff),
the sample SD (N-1), and a mixed model that finds a planted quadratic depth effect and no phantom one."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats

from milebench.benchmarks.mmlongembed.statistics import depth_effects, paired_test, spread

A = [1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1]
B = [0, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1]


def test_paired_t_test_equals_scipy_and_d_is_mean_over_sample_sd() -> None:
    test = paired_test(A, B, resamples=2000)
    reference = stats.ttest_rel(A, B)
    assert test.t == pytest.approx(reference.statistic, rel=1e-12)
    assert test.p_value == pytest.approx(reference.pvalue, rel=1e-12)
    diff = [a - b for a, b in zip(A, B, strict=True)]  # 4 x +1, 1 x -1, 7 x 0
    mean = 3 / 12
    sd = math.sqrt((4 * (1 - mean) ** 2 + (-1 - mean) ** 2 + 7 * mean**2) / 11)
    assert test.mean_difference == pytest.approx(mean)
    assert test.cohens_d == pytest.approx(mean / sd)
    assert test.cohens_d != pytest.approx(mean / float(np.std(diff)))  # not the population SD
    assert test.n == 12


def test_bootstrap_interval_matches_the_normal_one_on_many_pairs() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.random(2000) < 0.6, rng.random(2000) < 0.5
    test = paired_test(a.astype(float), b.astype(float))
    diff = a.astype(float) - b.astype(float)
    half = 1.96 * diff.std(ddof=1) / math.sqrt(len(diff))
    assert test.resamples == 10_000
    assert test.ci_low == pytest.approx(diff.mean() - half, abs=0.004)
    assert test.ci_high == pytest.approx(diff.mean() + half, abs=0.004)


def test_identical_models_have_no_test() -> None:
    test = paired_test(A, A)
    assert test.mean_difference == 0 and test.t is None and test.cohens_d is None and test.ci_low is None


def test_sd_is_the_sample_sd() -> None:
    result = spread({"text": 1.0, "image": 2.0, "mixed": 3.0, "other": 4.0})
    assert result.mean == 2.5
    assert result.sd == pytest.approx(statistics.stdev([1, 2, 3, 4]))  # 1.2910, not pstdev's 1.1180
    assert spread({"text": 80.0}).sd is None


def simulate(seed: int, curvature: float) -> tuple[list[float], list[int], list[int], list[str]]:
    """Scores of 20 needles x 6 depths x 3 bins: needle intercept + curvature * centred depth^2 + noise."""
    rng = np.random.default_rng(seed)
    needles = [f"n{i}" for i in range(20)]
    intercept = dict(zip(needles, rng.normal(0, 0.5, len(needles)), strict=True))
    rows = [(n, d, b) for n in needles for d in (0, 20, 40, 60, 80, 100) for b in (256, 1024, 4096)]
    y = [intercept[n] + curvature * ((d - 50) / 50) ** 2 + rng.normal(0, 0.5) for n, d, _ in rows]
    return y, [d for _, d, _ in rows], [b for _, _, b in rows], [n for n, _, _ in rows]


def test_mixed_model_recovers_a_planted_quadratic_depth_effect() -> None:
    effects = depth_effects(*simulate(0, curvature=0.6))
    assert effects.converged and effects.groups == 20 and effects.levels == (0, 20, 40, 60, 80, 100)
    assert effects.depth is not None and effects.depth.df == 5 and effects.depth.p_value < 1e-4
    assert effects.quadratic is not None and effects.quadratic.df == 1 and effects.quadratic.p_value < 1e-4


def test_mixed_model_finds_no_quadratic_effect_where_none_is_planted() -> None:
    quadratic = [depth_effects(*simulate(seed, curvature=0.0)).quadratic for seed in range(10)]
    rejected = [q for q in quadratic if q is not None and q.p_value < 0.05]
    assert len(rejected) <= 2  # the 5% level: 0.5 expected of 10


def test_mixed_model_says_why_it_has_no_test() -> None:
    y, depths, bins, needles = simulate(0, 0.6)
    assert (
        depth_effects([1.0] * len(y), depths, bins, needles).note
        == "every score is the same: nothing to model"
    )
    two = [d for d in depths if d in (0, 100)]
    kept = [i for i, d in enumerate(depths) if d in (0, 100)]
    effects = depth_effects([y[i] for i in kept], two, [bins[i] for i in kept], [needles[i] for i in kept])
    assert effects.quadratic is None and effects.note is not None
