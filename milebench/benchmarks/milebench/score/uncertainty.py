"""How sure is a score? Seeded bootstrap intervals and paired model-vs-model comparisons.

Samples are resampled within each task (tasks are fixed, samples are the random draw), and every
replicate goes through the paper's aggregation (task mean, group mean of tasks, overall mean of
groups), so group and overall intervals respect the unweighted design of the table. The resampled
set is the one the point value divides by: under the official denominator every expected sample, a
missing or failed one as 0, so an interval never looks tighter than its number. Each task draws from
its own generator seeded by (seed, task name): a task's interval does not change when another task is
added. A paired comparison uses the samples present on both sides (every expected one under the
official denominator, a failure counting 0 on its side), so the two sides are judged on the same
questions; its p-value comes from a sign-flip permutation test (under the null hypothesis the two
answers of a sample are exchangeable), run through the same aggregation.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.score.aggregate import (
    DIAGNOSTIC_GROUPS,
    OVERALL_DIAG,
    OVERALL_REAL,
    REALISTIC_GROUPS,
    Denominator,
    column_tasks,
    group_scores,
    mean_x100,
    overall_diag,
    overall_real,
    sample_score,
    scored,
)
from milebench.benchmarks.milebench.spec.task import Group, TaskSpec
from milebench.spec.base import Spec


@dataclass(frozen=True)
class TaskSamples:
    """One task's samples under a denominator (ids and scores in [0, 1]), how many were expected and how
    many of those were scored."""

    ids: tuple[int, ...]
    scores: np.ndarray
    n_expected: int
    n_scored: int


class Estimate(Spec):
    """A value in table points (x100) with its bootstrap interval; all ``None`` when not computable."""

    value: float | None
    low: float | None
    high: float | None


class Comparison(Spec):
    """A minus B on the samples both answered: difference, its interval and a permutation p-value."""

    column: str
    difference: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n_pairs: int


def task_samples(
    judgments: Iterable[Judgment], scorer: str = "paper", denominator: Denominator = Denominator.EXPECTED
) -> TaskSamples:
    """One task's samples under ``scorer``: every judged one (a missing or failed one as 0) under the
    official denominator, the scored ones only under ``scored-only``."""
    rows = [j for j in judgments if j.scorer == scorer]
    kept = rows if denominator is Denominator.EXPECTED else [j for j in rows if scored(j)]
    return TaskSamples(
        ids=tuple(j.sample_id for j in kept),
        scores=np.array([sample_score(j) for j in kept], dtype=float),
        n_expected=len(rows),
        n_scored=sum(map(scored, rows)),
    )


def _rng(seed: int, task: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(task.encode("utf-8"))])


def _columns(per_task: Mapping[str, np.ndarray], tasks: Sequence[TaskSpec]) -> dict[str, np.ndarray | None]:
    """Task arrays -> group and overall arrays by the paper's rules; any missing member leaves None."""
    out: dict[str, np.ndarray | None] = {t.name: per_task.get(t.name) for t in tasks}
    groups: dict[Group, np.ndarray | None] = {}
    for group in Group:
        members = [t.name for t in tasks if t.group is group]
        arrays = [per_task.get(name) for name in members]
        present = [a for a in arrays if a is not None]
        groups[group] = np.mean(present, axis=0) if members and len(present) == len(arrays) else None
        out[group.value] = groups[group]
    for column, columns in ((OVERALL_REAL, REALISTIC_GROUPS), (OVERALL_DIAG, DIAGNOSTIC_GROUPS)):
        arrays = [groups[g] for g in columns]
        present = [a for a in arrays if a is not None]
        out[column] = np.mean(present, axis=0) if len(present) == len(arrays) else None
    return out


def _interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return float(low), float(high)


def _bootstrap_means(values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Means of ``resamples`` draws with replacement."""
    index = rng.integers(0, len(values), size=(resamples, len(values)))
    return values[index].mean(axis=1)


def point_columns(samples: Mapping[str, TaskSamples], tasks: Sequence[TaskSpec]) -> dict[str, float | None]:
    """Every task, group and overall value (x100) without intervals, by the paper's rules exactly as a
    task score file computes its task's value (``milebench.benchmarks.milebench.score.aggregate``), so the
    two never differ."""
    values = {t.name: mean_x100(list(samples[t.name].scores)) if t.name in samples else None for t in tasks}
    groups = group_scores(values, tasks)
    return {
        **values,
        **{g.value: v for g, v in groups.items()},
        OVERALL_REAL: overall_real(groups),
        OVERALL_DIAG: overall_diag(groups),
    }


def bootstrap_table(
    samples: Mapping[str, TaskSamples],
    tasks: Sequence[TaskSpec],
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Estimate]:
    """Estimate for every task, group and overall column (x100); a task without samples has none.
    The values are ``point_columns``; the intervals resample through the same aggregation."""
    replicates: dict[str, np.ndarray] = {}
    for task in tasks:
        found = samples.get(task.name)
        if found is None or len(found.scores) == 0:
            continue
        replicates[task.name] = 100 * _bootstrap_means(found.scores, _rng(seed, task.name), resamples)
    point, spread = point_columns(samples, tasks), _columns(replicates, tasks)
    table = {}
    for column, value in point.items():
        reps = spread[column]
        if value is None or reps is None:
            table[column] = Estimate(value=None, low=None, high=None)
        else:
            low, high = _interval(reps, confidence)
            table[column] = Estimate(value=value, low=low, high=high)
    return table


def _sign_flip_means(values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    signs = rng.choice(np.array([-1.0, 1.0]), size=(resamples, len(values)))
    return (signs * values).mean(axis=1)


def paired_differences(a: TaskSamples, b: TaskSamples) -> np.ndarray:
    """Score of A minus score of B on the sample ids present on both sides, in A's order."""
    b_scores = dict(zip(b.ids, b.scores, strict=True))
    return np.array([s - b_scores[i] for i, s in zip(a.ids, a.scores, strict=True) if i in b_scores])


def compare(
    a: Mapping[str, TaskSamples],
    b: Mapping[str, TaskSamples],
    tasks: Sequence[TaskSpec],
    resamples: int = 5000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[Comparison]:
    """Paired comparison of A and B per task, group and overall column (differences x100).

    A task enters only when both sides have at least one common sample; a group or overall column
    needs all its tasks, as in the paper's table.
    """
    diffs = {}
    for task in tasks:
        if task.name in a and task.name in b:
            d = paired_differences(a[task.name], b[task.name])
            if len(d):
                diffs[task.name] = d
    observed = _columns({name: np.array(100 * d.mean()) for name, d in diffs.items()}, tasks)
    boot = _columns({n: 100 * _bootstrap_means(d, _rng(seed, n), resamples) for n, d in diffs.items()}, tasks)
    flips = _columns(
        {n: 100 * _sign_flip_means(d, _rng(seed + 1, n), resamples) for n, d in diffs.items()},
        tasks,
    )
    pairs = {n: len(d) for n, d in diffs.items()}
    results = []
    for column, value in observed.items():
        reps, null = boot[column], flips[column]
        if value is None or reps is None or null is None:
            results.append(
                Comparison(column=column, difference=None, low=None, high=None, p_value=None, n_pairs=0)
            )
            continue
        low, high = _interval(reps, confidence)
        extreme = int(np.sum(np.abs(null) >= abs(float(value)) - 1e-12))
        results.append(
            Comparison(
                column=column,
                difference=float(value),
                low=low,
                high=high,
                p_value=(1 + extreme) / (1 + resamples),
                n_pairs=sum(pairs.get(t.name, 0) for t in column_tasks(column, tasks)),
            )
        )
    return results
