"""Scores as the paper aggregates them: task means, levels, group means and the two overall columns.

Task and level scores are means x100 over every expected sample, as the official evaluator divides: it
never sees a failure (the official run generates every sample), so a sample without an answer (missing
prediction, failed generation) counts as wrong, score 0. The mean over scored samples only is kept as
the named variant ``scored-only``, beside and never instead. A group is the plain mean of its tasks'
scores and the overall columns are plain means of groups (Real.: the nine realistic groups, Diag.:
N-1, N-2 and I-1), which reproduces the paper's printed overall values except the rows its own spec
lists as inconsistent. The official score script stops at task scores; the group rules are the paper's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from pydantic import Field

from milebench.benchmarks.milebench.data.schema import QuantityLevel
from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import GROUP_CATEGORY, Category, Group, TaskSpec
from milebench.infer.records import FailureKind
from milebench.spec.base import Spec

LEVELS: tuple[QuantityLevel, ...] = ("Few", "Medium", "Many")
OVERALL_REAL, OVERALL_DIAG = "overall_real", "overall_diag"
"""Keys of the two overall columns of the main table."""
REALISTIC_GROUPS: tuple[Group, ...] = tuple(g for g in Group if GROUP_CATEGORY[g] is not Category.DIAGNOSTIC)
DIAGNOSTIC_GROUPS: tuple[Group, ...] = tuple(g for g in Group if GROUP_CATEGORY[g] is Category.DIAGNOSTIC)


class Denominator(StrEnum):
    """Which samples a mean divides by."""

    EXPECTED = "expected"
    """The official evaluator's: every expected sample, a missing or failed one scoring 0 (paper)."""
    SCORED_ONLY = "scored-only"
    """Only the samples with an answer: a named variant that a failure cannot lower."""


class LevelScore(Spec):
    score: float | None = Field(
        description="Mean x100 over the level's expected samples (missing and failed count 0); null if none."
    )
    n: int = Field(ge=0, description="Expected samples of the level: the denominator.")
    n_scored: int = Field(ge=0)


class VariantScore(Spec):
    """A task's score under another scorer than the file's main one (same samples, same statuses, same
    denominator)."""

    scorer: str
    score: float | None
    n_scored: int = Field(ge=0)
    levels: dict[QuantityLevel, LevelScore]


class TaskScore(Spec):
    """One task score file: the score, how many samples it rests on, and the image-quantity split.

    The top-level score is the ``scorer``'s (``paper``); ``variants`` holds the same task under the
    other scorers, so the report can show how much of a score is the scorer.
    """

    task: str
    model: str
    mode: Mode
    scorer: str
    denominator: Denominator = Field(description="What ``score`` divides by: always the official one.")
    score: float | None = Field(
        description="Mean x100 over every expected sample, a missing or failed one scoring 0 (the official "
        "denominator); null only when the task has no samples."
    )
    scored_only: float | None = Field(
        description="Variant scored-only: mean x100 over scored samples only; null when none was scored."
    )
    n: int = Field(ge=0, description="Prepared samples (the expected count).")
    n_scored: int = Field(ge=0)
    n_missing: int = Field(ge=0)
    n_failed: int = Field(ge=0)
    levels: dict[QuantityLevel, LevelScore]
    failures: dict[FailureKind, int] = Field(default_factory=dict, description="Failed samples by kind.")
    missing_ids: tuple[int, ...] = Field(default=(), description="Sample ids without a prediction.")
    failed_ids: tuple[int, ...] = Field(default=(), description="Sample ids whose prediction failed.")
    variants: dict[str, VariantScore] = Field(default_factory=dict, description="Scorer name -> score.")
    prompt_rebuilt: bool = Field(
        default=True, description="false: judged against the task JSON alone, no prompt rebuilt."
    )

    def difference(self, scorer: str) -> float | None:
        """``scorer``'s score minus this file's main score (table points); None if either is absent."""
        variant = self.variants.get(scorer)
        if variant is None or variant.score is None or self.score is None:
            return None
        return variant.score - self.score


class Coverage(Spec):
    """How much of what a model should have answered was scored, and why the rest was not."""

    tasks_expected: int
    tasks_missing: int = Field(description="Tasks without a score file.")
    samples_expected: int = Field(
        description="Samples the run's tasks should have: the specs' counts (a fixture's own, at most the "
        "run's limit), or a task's prepared samples where it has more."
    )
    samples_scored: int
    samples_missing: int
    samples_failed: int

    @property
    def complete(self) -> bool:
        return self.tasks_missing == 0 and self.samples_scored == self.samples_expected

    @property
    def fraction(self) -> float | None:
        return self.samples_scored / self.samples_expected if self.samples_expected else None


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def mean_x100(scores: Sequence[float]) -> float | None:
    """Mean of per-sample scores in table units (x100)."""
    value = mean(scores)
    return None if value is None else 100 * value


def scored(judgment: Judgment) -> bool:
    return judgment.status == "scored" and judgment.score is not None


def sample_score(judgment: Judgment) -> float:
    """A sample's score under the official denominator: its score, or 0 without an answer."""
    return judgment.score if scored(judgment) and judgment.score is not None else 0.0


def _levels(judgments: Sequence[Judgment]) -> dict[QuantityLevel, LevelScore]:
    levels = {}
    for level in LEVELS:
        rows = [j for j in judgments if j.image_quantity_level == level]
        levels[level] = LevelScore(
            score=mean_x100([sample_score(j) for j in rows]), n=len(rows), n_scored=sum(map(scored, rows))
        )
    return levels


def variant_score(scorer: str, judgments: Sequence[Judgment]) -> VariantScore:
    return VariantScore(
        scorer=scorer,
        score=mean_x100([sample_score(j) for j in judgments]),
        n_scored=sum(map(scored, judgments)),
        levels=_levels(judgments),
    )


def summarise(
    task: str,
    model: str,
    mode: Mode,
    scorer: str,
    judgments: Sequence[Judgment],
    variants: Mapping[str, Sequence[Judgment]] | None = None,
) -> TaskScore:
    """Task score and per-level scores from one task's judgments (levels as the judgments carry them),
    over every judged sample; the scored-only mean beside it.

    ``variants`` maps other scorer names to their judgments of the same samples.
    """
    failed = [j for j in judgments if j.status == "failed"]
    kinds = sorted({j.failure for j in failed if j.failure is not None})
    return TaskScore(
        task=task,
        model=model,
        mode=mode,
        scorer=scorer,
        denominator=Denominator.EXPECTED,
        score=mean_x100([sample_score(j) for j in judgments]),
        scored_only=mean_x100([j.score for j in judgments if scored(j) and j.score is not None]),
        n=len(judgments),
        n_scored=sum(map(scored, judgments)),
        n_missing=sum(1 for j in judgments if j.status == "missing"),
        n_failed=len(failed),
        levels=_levels(judgments),
        failures={kind: sum(1 for j in failed if j.failure is kind) for kind in kinds},
        missing_ids=tuple(j.sample_id for j in judgments if j.status == "missing"),
        failed_ids=tuple(j.sample_id for j in failed),
        variants={name: variant_score(name, rows) for name, rows in (variants or {}).items()},
        prompt_rebuilt=all(j.prompt_rebuilt for j in judgments),
    )


def pooled_levels(scores: Iterable[TaskScore | VariantScore]) -> dict[QuantityLevel, LevelScore]:
    """Accuracy per image-quantity level over a model's tasks: every expected sample of the level counts
    once (a missing or failed one as 0).

    The evaluator reports each level as [sum of scores, count] per task; pooling those sums and counts
    over tasks gives the per-level accuracy of a model across the benchmark.
    """
    items = list(scores)
    pooled = {}
    for level in LEVELS:
        parts = [s.levels[level] for s in items if level in s.levels and s.levels[level].score is not None]
        n = sum(part.n for part in parts)
        total = math.fsum(part.score * part.n for part in parts if part.score is not None)
        pooled[level] = LevelScore(
            score=total / n if n else None, n=n, n_scored=sum(part.n_scored for part in parts)
        )
    return pooled


def complete_mean(values: Sequence[float | None]) -> float | None:
    """Mean of values that must all be present: one missing value leaves the aggregate undefined."""
    present = [v for v in values if v is not None]
    return mean(present) if present and len(present) == len(values) else None


def group_scores(
    task_scores: Mapping[str, float | None], tasks: Iterable[TaskSpec]
) -> dict[Group, float | None]:
    """Mean of each group's task scores; a group with any task unscored has no score (null)."""
    members: dict[Group, list[str]] = {g: [] for g in Group}
    for task in tasks:
        members[task.group].append(task.name)
    return {group: complete_mean([task_scores.get(n) for n in names]) for group, names in members.items()}


def column_tasks(column: str, tasks: Iterable[TaskSpec]) -> list[TaskSpec]:
    """The tasks a main-table column rests on: one task, a group, or the groups of an overall."""
    if column == OVERALL_REAL:
        groups = set(REALISTIC_GROUPS)
    elif column == OVERALL_DIAG:
        groups = set(DIAGNOSTIC_GROUPS)
    elif column in {g.value for g in Group}:
        groups = {Group(column)}
    else:
        return [t for t in tasks if t.name == column]
    return [t for t in tasks if t.group in groups]


def overall(groups: Mapping[Group, float | None], columns: Sequence[Group]) -> float | None:
    """Unweighted mean of the given group columns; null unless all have a score."""
    return complete_mean([groups.get(g) for g in columns])


def overall_real(groups: Mapping[Group, float | None]) -> float | None:
    return overall(groups, REALISTIC_GROUPS)


def overall_diag(groups: Mapping[Group, float | None]) -> float | None:
    return overall(groups, DIAGNOSTIC_GROUPS)


def coverage(cells: Iterable[tuple[TaskScore | None, int]]) -> Coverage:
    """Coverage over a model's expected task cells, each a score (``None``: no score file) and the
    samples its spec expects: a missing task counts all of them, a short one (a task file with fewer
    samples than the spec says) counts what it lacks, so neither can read as complete."""
    cells = list(cells)
    present = [s for s, _ in cells if s is not None]
    return Coverage(
        tasks_expected=len(cells),
        tasks_missing=len(cells) - len(present),
        samples_expected=sum(expected if s is None else max(s.n, expected) for s, expected in cells),
        samples_scored=sum(s.n_scored for s in present),
        samples_missing=sum(s.n_missing for s in present),
        samples_failed=sum(s.n_failed for s in present),
    )
