"""The upstream task JSON format (``<Task>/<Task>.json``), as pydantic models.

Upstream files carry keys beyond the documented ones in ``meta_data``; those are kept (``extra="allow"``)
because rejecting them would reject the real data. Sample-level keys are strict.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from milebench.benchmarks.milebench.spec.task import QuestionType

QuantityLevel = Literal["Few", "Medium", "Many"]


class TaskInstance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    context: str
    images_path: list[str] = Field(min_length=1)
    choice_list: list[str] | None = None
    combined_1_images: list[str] = Field(default_factory=list)


class Sample(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sample_id: int
    task_instruction_id: int = Field(ge=0)
    task_instance: TaskInstance
    response: str
    image_quantity_level: QuantityLevel


class MetaData(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    task_instruction: list[str] = Field(min_length=1)
    question_type: QuestionType


class TaskFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    meta_data: MetaData
    data: list[Sample]


def quantity_level(n_images: int) -> QuantityLevel:
    """The evaluator's level from an image count: <6 Few, >31 Many, else Medium."""
    if n_images < 6:
        return "Few"
    if n_images > 31:
        return "Many"
    return "Medium"


def task_json_path(task: str, adversarial: bool = False) -> str:
    """Relative path of a task's JSON inside the extracted ``MileBench/`` tree."""
    suffix = "-adv" if adversarial else ""
    return f"{task}/{task}{suffix}.json"
