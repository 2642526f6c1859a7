"""A run's ``limit``: the same few samples of each task every time, in the proportions of its image
quantity levels (Few, Medium, Many), so a subset keeps the task's mix of short and long inputs.

Within a level the samples are ranked by a hash of the seed, the task and the sample id: no random state,
so every mode of a task (and every rerun, on any machine) keeps the same ids."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from milebench.benchmarks.milebench.data.schema import Sample

SUBSET_SEED = 0
"""Part of every rank: changing it would draw other subsets, so it is a constant, not a setting."""


def quotas(sizes: dict[str, int], limit: int) -> dict[str, int]:
    """``limit`` shared over strata in proportion to their sizes, by largest remainder (ties: larger
    stratum, then name)."""
    total = sum(sizes.values())
    exact = {level: limit * n / total for level, n in sizes.items()}
    given = {level: int(share) for level, share in exact.items()}
    left = limit - sum(given.values())
    order = sorted(sizes, key=lambda level: (given[level] - exact[level], -sizes[level], level))
    for level in order[:left]:
        given[level] += 1
    return given


def rank(task: str, sample_id: int) -> str:
    return hashlib.sha256(f"{SUBSET_SEED}/{task}/{sample_id}".encode()).hexdigest()


def subset(task: str, samples: Sequence[Sample], limit: int | None) -> list[Sample]:
    """At most ``limit`` of ``samples`` (all of them without one), stratified by image quantity level,
    in the file's order."""
    if limit is None or limit >= len(samples):
        return list(samples)
    strata: dict[str, list[Sample]] = {}
    for sample in samples:
        strata.setdefault(sample.image_quantity_level, []).append(sample)
    share = quotas({level: len(group) for level, group in strata.items()}, limit)
    chosen = {
        s.sample_id
        for level, group in strata.items()
        for s in sorted(group, key=lambda s: rank(task, s.sample_id))[: share[level]]
    }
    return [s for s in samples if s.sample_id in chosen]
