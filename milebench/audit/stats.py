"""Rates of changed answers with Wilson score intervals: honest at 0 of n and for small n, where the
normal approximation gives an empty or negative interval."""

from __future__ import annotations

from scipy.stats import binomtest

from milebench.spec.base import Spec


class Rate(Spec):
    """``changed`` of ``total`` with its Wilson interval; all ``None`` with no samples."""

    changed: int
    total: int
    rate: float | None
    low: float | None
    high: float | None


def wilson_rate(changed: int, total: int, confidence: float = 0.95) -> Rate:
    """``changed / total`` and its Wilson score interval at ``confidence``."""
    if not 0 <= changed <= total:
        raise ValueError(f"{changed} changed of {total}: need 0 <= changed <= total")
    if total == 0:
        return Rate(changed=0, total=0, rate=None, low=None, high=None)
    interval = binomtest(changed, total).proportion_ci(confidence_level=confidence, method="wilson")
    return Rate(
        changed=changed, total=total, rate=changed / total, low=float(interval.low), high=float(interval.high)
    )
