"""The paper's statistical tests, on per-query scores, with scipy and statsmodels.

- ``paired_test``: model scale. A paired t-test on query-level scores (``scipy.stats.ttest_rel``), a
  percentile bootstrap interval of the mean difference (``scipy.stats.bootstrap``, 10,000 resamples by
  default, seeded), and Cohen's d as mean(diff) / sd(diff) with the sample SD (N-1): the form the
  paper's values fit.
- ``depth_effects``: position bias. A linear mixed-effects model (statsmodels ``MixedLM``, REML) with a
  random intercept per needle instance, fitted twice: with depth as levels (Wald chi2 on the level
  contrasts, levels - 1 df) and with centred linear + quadratic depth (Wald chi2 on the quadratic term,
  1 df). The length bin enters both as levels, so a depth effect is not a length effect. A fit that
  does not converge is still reported, flagged.
- ``spread``: mean and sample SD (N-1) of a model's scores under the interference modalities.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence

import numpy as np
from numpy.linalg import LinAlgError
from numpy.typing import ArrayLike
from scipy import stats
from statsmodels.regression.mixed_linear_model import MixedLM
from statsmodels.tools.sm_exceptions import ConvergenceWarning

from milebench.spec.base import Spec

log = logging.getLogger(__name__)

RESAMPLES = 10_000
CONFIDENCE = 0.95
OPTIMIZERS = ["powell", "lbfgs"]
"""Derivative-free first: on 0/1 scores statsmodels' default gradient search often stops short."""


class PairedTest(Spec):
    """A minus B on the same queries, in score units (P@1 in [0, 1]); ``None`` where undefined (fewer
    than two pairs, or differences that never vary)."""

    n: int
    mean_difference: float
    ci_low: float | None
    ci_high: float | None
    t: float | None
    p_value: float | None
    cohens_d: float | None
    resamples: int
    confidence: float
    seed: int


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def paired_test(
    a: ArrayLike,
    b: ArrayLike,
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> PairedTest:
    """Paired t-test, bootstrap interval of the mean difference and Cohen's d of ``a - b``."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {len(x)} and {len(y)}")
    diff = x - y
    n = len(diff)
    low = high = t = p = d = None
    if n >= 2 and np.ptp(diff) > 0:
        test = stats.ttest_rel(x, y)
        t, p = _finite(test.statistic), _finite(test.pvalue)
        d = float(diff.mean() / diff.std(ddof=1))
        boot = stats.bootstrap(
            (diff,),
            np.mean,
            n_resamples=resamples,
            confidence_level=confidence,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
        low, high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    return PairedTest(
        n=n,
        mean_difference=float(diff.mean()) if n else 0.0,
        ci_low=low,
        ci_high=high,
        t=t,
        p_value=p,
        cohens_d=d,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
    )


class WaldTest(Spec):
    chi2: float
    df: int
    p_value: float


class DepthEffects(Spec):
    """The two Wald tests of the position-bias model; ``note`` says why one is missing."""

    n: int
    groups: int
    levels: tuple[int, ...]
    depth: WaldTest | None
    quadratic: WaldTest | None
    converged: bool
    note: str | None = None


def _levels(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Treatment dummies of ``values`` (the first level the reference) and the levels."""
    levels = np.unique(values)
    return (values[:, None] == levels[None, 1:]).astype(float), levels


def _wald(y: np.ndarray, exog: np.ndarray, groups: np.ndarray, tested: slice) -> tuple[WaldTest, bool]:
    """Fit the random-intercept model; chi2 = b' V^-1 b over the ``tested`` fixed effects."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        fit = MixedLM(y, exog, groups=groups).fit(reml=True, method=OPTIMIZERS)
    converged = bool(fit.converged) and not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    k = exog.shape[1]
    beta = np.asarray(fit.fe_params)[tested]
    cov = np.asarray(fit.cov_params())[:k, :k][tested, tested]
    chi2 = float(beta @ np.linalg.solve(cov, beta))
    df = len(beta)
    return WaldTest(chi2=chi2, df=df, p_value=float(stats.chi2.sf(chi2, df))), converged


def depth_effects(
    scores: Sequence[float], depths: Sequence[int], bins: Sequence[int], needles: Sequence[str]
) -> DepthEffects:
    """Wald chi2 of depth as levels and of a quadratic depth term, random intercept per needle."""
    y = np.asarray(scores, dtype=float)
    depth = np.asarray(depths, dtype=float)
    groups = np.asarray(needles)
    levels = tuple(int(v) for v in np.unique(depth))
    base = DepthEffects(
        n=len(y), groups=len(set(needles)), levels=levels, depth=None, quadratic=None, converged=False
    )
    if len(levels) < 3:
        return base.model_copy(update={"note": "fewer than 3 depths: no quadratic term"})
    if np.ptp(y) == 0:
        return base.model_copy(update={"note": "every score is the same: nothing to model"})
    bin_dummies, _ = _levels(np.asarray(bins))
    intercept = np.ones((len(y), 1))
    depth_dummies, _ = _levels(depth)
    centred = (depth - depth.mean()) / 100
    polynomial = np.column_stack([centred, centred**2])
    try:
        by_level, ok_levels = _wald(
            y, np.hstack([intercept, depth_dummies, bin_dummies]), groups, slice(1, len(levels))
        )
        quadratic, ok_quadratic = _wald(
            y, np.hstack([intercept, polynomial, bin_dummies]), groups, slice(2, 3)
        )
    except (LinAlgError, ValueError) as err:
        log.warning("position-bias model not fitted: %s", err)
        return base.model_copy(update={"note": f"model not fitted: {err}"})
    return base.model_copy(
        update={"depth": by_level, "quadratic": quadratic, "converged": ok_levels and ok_quadratic}
    )


class Spread(Spec):
    """A model's scores under each interference modality, their mean and sample SD (N-1)."""

    scores: dict[str, float]
    mean: float | None
    sd: float | None


def spread(scores: dict[str, float]) -> Spread:
    values = list(scores.values())
    return Spread(
        scores=scores,
        mean=float(np.mean(values)) if values else None,
        sd=float(np.std(values, ddof=1)) if len(values) >= 2 else None,
    )
