"""A small task list covering every content style of the mini-MileBench, for fast fixture tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from milebench.benchmarks.milebench.spec.task import (
    GROUP_CATEGORY,
    Group,
    Metric,
    QuestionType,
    ScorerKind,
    TaskSpec,
)
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.model import ModelSpec


def task_spec(
    name: str,
    group: Group,
    question_type: QuestionType,
    scorer: ScorerKind,
    has_adversarial: bool = True,
    labelled_choices: bool = True,
    n_samples: int = 200,
) -> TaskSpec:
    return TaskSpec(
        name=name,
        display_name=name,
        group=group,
        group_name=f"group {group.value}",
        category=GROUP_CATEGORY[group],
        question_type=question_type,
        metric=Metric.ROUGE_L if scorer is ScorerKind.ROUGE_L else Metric.ACCURACY,
        scorer=scorer,
        n_samples=n_samples,
        has_adversarial=has_adversarial,
        labelled_choices=labelled_choices,
        source_dataset=name,
    )


MC, OE = QuestionType.MULTI_CHOICE, QuestionType.OPEN_ENDED
MINI_TASKS: tuple[TaskSpec, ...] = (
    task_spec("ActionSequence", Group.T1, MC, ScorerKind.CHOICE),
    task_spec("SlideVQA", Group.S2, MC, ScorerKind.CHOICE),
    task_spec("Spot-the-Diff", Group.S3, OE, ScorerKind.ROUGE_L),
    task_spec("MMCoQA", Group.S4, OE, ScorerKind.SUBSTRING),
    task_spec("TextNeedleInAHaystack", Group.N1, OE, ScorerKind.NEEDLE, has_adversarial=False),
    task_spec("ImageNeedleInAHaystack", Group.N2, OE, ScorerKind.NEEDLE, has_adversarial=False),
    task_spec("GPR1200", Group.I1, MC, ScorerKind.CHOICE, has_adversarial=False, labelled_choices=False),
)


def builtin_model(name: str = "random", adapter: str = "random", **kw: Any) -> ModelSpec:
    """A baseline-section spec of a built-in model; ``kw`` sets or overrides any other field."""
    fields: dict[str, Any] = {
        "name": name,
        "display_name": name,
        "section": "baseline",
        "adapter": adapter,
        "weights": {"kind": "builtin"},
    }
    fields.update(kw)
    return ModelSpec.model_validate(fields)


def linked_specs(specs: Path) -> Path:
    """A specs folder whose tasks, models, locks and paper spec link the kit's, with an empty ``runs/``
    for the test's own run specs."""
    specs.mkdir(parents=True)
    for part in ("tasks", "models", "locks", "paper.yaml"):
        src = DEFAULT_SPECS / part
        (specs / part).symlink_to(src, target_is_directory=src.is_dir())
    (specs / "runs").mkdir()
    return specs
