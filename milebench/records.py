"""Records passed between stages: prepared samples, predictions and per-sample judgments."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from milebench.data.schema import QuantityLevel
from milebench.spec.base import Spec
from milebench.spec.run import Mode
from milebench.spec.task import QuestionType

IMAGE_PLACEHOLDER = "<ImageHere>"
"""The model-neutral image placeholder (the official literal); adapters map it to their own token."""


class PreparedSample(Spec):
    """One model input as the official code builds it, before any model-specific mapping."""

    task: str
    mode: Mode
    sample_id: int
    instruction: str
    context: str = Field(description="Context with choice block, image placeholders replaced.")
    images: tuple[str, ...] = Field(description="Image paths relative to the MileBench/ data root.")
    image_sha256: tuple[str, ...]
    prompt_sha256: str
    question_type: QuestionType
    choices: tuple[str, ...] | None
    labelled_choices: bool = Field(
        default=True, description="Whether the prompt lists the choices with letters (false for GPR1200)."
    )
    response: str = Field(description="The gold answer.")
    image_quantity_level: QuantityLevel
    n_images: int = Field(description="Images of the sample before truncation or combining.")

    @property
    def prompt(self) -> str:
        """Final text as the official code joins it."""
        return f"{self.instruction}\n{self.context}"


class FailureKind(StrEnum):
    OOM = "oom"
    API_ERROR = "api_error"
    TIMEOUT = "timeout"
    CONTEXT_OVERFLOW = "context_overflow"
    ADAPTER_ERROR = "adapter_error"


class Prediction(Spec):
    """A model's answer to one sample, or the failure that stopped it; failures are never scored."""

    task: str
    mode: Mode
    model: str
    sample_id: int
    response: str | None
    failure: FailureKind | None = None
    failure_detail: str | None = None
    cache_key: str
    seconds: float = Field(ge=0)
    input_tokens: int | None = None
    output_tokens: int | None = None


class Judgment(Spec):
    """One sample's score under one scorer; ``status`` says why a sample has no score."""

    task: str
    mode: Mode
    model: str
    sample_id: int
    scorer: str
    status: Literal["scored", "missing", "failed"]
    extracted: str | None = None
    score: float | None = None
    image_quantity_level: QuantityLevel
