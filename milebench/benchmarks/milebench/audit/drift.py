"""Environment drift: the same model's answers to the same samples from two environments or backends
(another image or transformers version, the transformers backend against vLLM).

Per task, the score difference A minus B on the samples judged on both sides with a paired bootstrap
interval and a permutation p-value (``milebench.benchmarks.milebench.score.uncertainty.compare``, the
aggregation of the paper's table for the group and overall columns), and per sample: the flip rate
(samples whose score differs; a failed or missing answer scores 0, as the official denominator counts it)
and the rate of changed answer texts, each with a Wilson interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from milebench.audit.stats import Rate, wilson_rate
from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.score.aggregate import sample_score
from milebench.benchmarks.milebench.score.uncertainty import Comparison, compare, task_samples
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.infer.records import Prediction
from milebench.spec.base import Spec

ALL_TASKS = "all"


@dataclass(frozen=True)
class Side:
    """One environment's judgments (under one scorer) and predictions of each task."""

    label: str
    judgments: Mapping[str, Sequence[Judgment]]
    predictions: Mapping[str, Mapping[int, Prediction]] = field(default_factory=dict)


class Flip(Spec):
    """A sample whose score or answer text differs between the two sides."""

    task: str
    sample_id: int
    score_a: float
    score_b: float
    text_a: str | None
    text_b: str | None


class TaskDrift(Spec):
    task: str
    comparison: Comparison | None
    """The paired score difference (none for the pooled row: see the overall columns)."""
    flips: Rate
    texts: Rate
    """Changed answer texts among the samples with a prediction on both sides."""
    inputs: Rate
    """Samples whose input token count differs, among those both sides counted: the two environments did
    not feed the model the same tokens (another chat template, image sizing or token expansion)."""


class DriftAudit(Spec):
    a: str
    b: str
    scorer: str
    resamples: int
    seed: int
    tasks: tuple[TaskDrift, ...]
    """Every task judged on both sides, then ``all``: flips and texts pooled over those tasks."""
    columns: tuple[Comparison, ...]
    """The group and overall columns the paper's aggregation could compute."""
    changed: tuple[Flip, ...]


def response(predictions: Mapping[int, Prediction], sample_id: int) -> str | None:
    found = predictions.get(sample_id)
    return None if found is None else found.response


@dataclass(frozen=True)
class Counts:
    """Samples judged on both sides and how many flipped; samples answered on both and how many changed;
    samples whose input tokens both sides counted and how many counts differ."""

    paired: int = 0
    flipped: int = 0
    answered: int = 0
    rewritten: int = 0
    counted: int = 0
    recounted: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(x + y for x, y in zip(self.totals(), other.totals(), strict=True)))

    def totals(self) -> tuple[int, int, int, int, int, int]:
        return self.paired, self.flipped, self.answered, self.rewritten, self.counted, self.recounted


def input_tokens(predictions: Mapping[int, Prediction], sample_id: int) -> int | None:
    found = predictions.get(sample_id)
    return None if found is None else found.input_tokens


def task_changes(task: str, a: Side, b: Side) -> tuple[list[Flip], Counts]:
    """The changed samples of one task and its counts."""
    scores_b = {j.sample_id: sample_score(j) for j in b.judgments[task]}
    preds_a, preds_b = a.predictions.get(task, {}), b.predictions.get(task, {})
    changed: list[Flip] = []
    paired = flipped = answered = rewritten = counted = recounted = 0
    for judgment in a.judgments[task]:
        i = judgment.sample_id
        if i not in scores_b:
            continue
        paired += 1
        score_a, score_b = sample_score(judgment), scores_b[i]
        both = i in preds_a and i in preds_b
        text_a, text_b = response(preds_a, i), response(preds_b, i)
        answered += both
        rewritten += both and text_a != text_b
        tokens_a, tokens_b = input_tokens(preds_a, i), input_tokens(preds_b, i)
        if tokens_a is not None and tokens_b is not None:
            counted += 1
            recounted += tokens_a != tokens_b
        flipped += score_a != score_b
        if score_a != score_b or (both and text_a != text_b):
            changed.append(
                Flip(task=task, sample_id=i, score_a=score_a, score_b=score_b, text_a=text_a, text_b=text_b)
            )
    return changed, Counts(paired, flipped, answered, rewritten, counted, recounted)


def judged_by(side: Side, scorer: str) -> Side:
    """``side`` with only the judgments of ``scorer`` (a score file holds every scorer's)."""
    rows = {task: [j for j in found if j.scorer == scorer] for task, found in side.judgments.items()}
    return Side(side.label, rows, side.predictions)


def task_drift(task: str, comparison: Comparison | None, counts: Counts) -> TaskDrift:
    return TaskDrift(
        task=task,
        comparison=comparison,
        flips=wilson_rate(counts.flipped, counts.paired),
        texts=wilson_rate(counts.rewritten, counts.answered),
        inputs=wilson_rate(counts.recounted, counts.counted),
    )


def drift_audit(
    a: Side, b: Side, tasks: Sequence[TaskSpec], scorer: str, resamples: int = 5000, seed: int = 0
) -> DriftAudit:
    """Per-task and pooled drift of B against A on the tasks judged on both sides (under ``scorer``)."""
    a, b = judged_by(a, scorer), judged_by(b, scorer)
    common = [t for t in tasks if a.judgments.get(t.name) and b.judgments.get(t.name)]
    judged_a = {t.name: task_samples(a.judgments[t.name], scorer) for t in common}
    judged_b = {t.name: task_samples(b.judgments[t.name], scorer) for t in common}
    comparisons = {c.column: c for c in compare(judged_a, judged_b, tasks, resamples, seed)}
    rows, changed, totals = [], [], Counts()
    for task in common:
        flips, counts = task_changes(task.name, a, b)
        changed += flips
        totals += counts
        rows.append(task_drift(task.name, comparisons[task.name], counts))
    task_names = {t.name for t in tasks}
    columns = tuple(
        c for name, c in comparisons.items() if name not in task_names and c.difference is not None
    )
    return DriftAudit(
        a=a.label,
        b=b.label,
        scorer=scorer,
        resamples=resamples,
        seed=seed,
        tasks=(
            *rows,
            task_drift(ALL_TASKS, None, totals),
        ),
        columns=columns,
        changed=tuple(changed),
    )
