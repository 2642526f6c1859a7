"""TaskSpec: one MileBench task (a folder of the upstream data) and how it is scored."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, StrictBool, StrictInt, model_validator

from milebench.spec.base import Spec

TASK_NAME = r"^[A-Za-z0-9-]+$"
"""A task's name: its upstream folder name and the file name of its cells, never a path."""


class Group(StrEnum):
    """The 12 columns of the paper's main table that tasks are averaged into."""

    T1 = "T-1"
    T2 = "T-2"
    T3 = "T-3"
    T4 = "T-4"
    S1 = "S-1"
    S2 = "S-2"
    S3 = "S-3"
    S4 = "S-4"
    S5 = "S-5"
    N1 = "N-1"
    N2 = "N-2"
    I1 = "I-1"


class Category(StrEnum):
    REALISTIC_TEMPORAL = "realistic-temporal"
    REALISTIC_SEMANTIC = "realistic-semantic"
    DIAGNOSTIC = "diagnostic"


class QuestionType(StrEnum):
    MULTI_CHOICE = "multi-choice"
    OPEN_ENDED = "open-ended"


class Metric(StrEnum):
    ACCURACY = "accuracy"
    ROUGE_L = "rouge-l"


class ScorerKind(StrEnum):
    """The four judgment rules of the official evaluator."""

    CHOICE = "choice"
    ROUGE_L = "rouge-l"
    NEEDLE = "needle"
    SUBSTRING = "substring"


GROUP_CATEGORY: dict[Group, Category] = {
    **{g: Category.REALISTIC_TEMPORAL for g in (Group.T1, Group.T2, Group.T3, Group.T4)},
    **{g: Category.REALISTIC_SEMANTIC for g in (Group.S1, Group.S2, Group.S3, Group.S4, Group.S5)},
    **{g: Category.DIAGNOSTIC for g in (Group.N1, Group.N2, Group.I1)},
}


def official_scorer(task_name: str, question_type: QuestionType) -> ScorerKind:
    """The evaluator's dispatch: by task name first, then by question type."""
    if "NeedleInAHaystack" in task_name:
        return ScorerKind.NEEDLE
    if "MMCoQA" in task_name:
        return ScorerKind.SUBSTRING
    if question_type is QuestionType.OPEN_ENDED:
        return ScorerKind.ROUGE_L
    return ScorerKind.CHOICE


class TaskSpec(Spec):
    """A MileBench task; ``name`` is the exact upstream folder name."""

    name: str = Field(pattern=TASK_NAME)
    display_name: str
    group: Group
    group_name: str
    category: Category
    question_type: QuestionType
    metric: Metric
    scorer: ScorerKind
    n_samples: StrictInt = Field(gt=0)
    has_adversarial: StrictBool
    labelled_choices: StrictBool = Field(
        default=True, description="False where options are listed without letters (GPR1200)."
    )
    source_dataset: str

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        if GROUP_CATEGORY[self.group] is not self.category:
            raise ValueError(f"category {self.category} does not match group {self.group}")
        expected = official_scorer(self.name, self.question_type)
        if self.scorer is not expected:
            raise ValueError(f"scorer {self.scorer} differs from the official dispatch ({expected})")
        metric = Metric.ROUGE_L if expected is ScorerKind.ROUGE_L else Metric.ACCURACY
        if self.metric is not metric:
            raise ValueError(f"metric {self.metric} does not match scorer {self.scorer} ({metric})")
        if not self.labelled_choices and self.question_type is not QuestionType.MULTI_CHOICE:
            raise ValueError("labelled_choices=false only applies to multi-choice tasks")
        return self
