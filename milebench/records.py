"""Records passed between stages: prepared samples, predictions and per-sample judgments."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from milebench.data.schema import QuantityLevel
from milebench.spec.base import Spec
from milebench.spec.run import Mode, TruncationMode
from milebench.spec.task import QuestionType

IMAGE_PLACEHOLDER = "<ImageHere>"
"""The model-neutral image placeholder (the official literal); adapters map it to their own token."""


def option_label(index: int) -> str:
    """The letter the official prompt puts before option ``index`` (0-based): ``chr(65 + index)``."""
    return chr(ord("A") + index)


class TruncationRecord(Spec):
    """What of a sample a model's context let through: images, text pieces and tokens kept and dropped.

    ``mode`` is null when no budget applies (builtin baselines, unknown context settings): nothing was
    cut for length, token fields are null. Images can still be dropped when the context has fewer
    image slots than images (the official pairing keeps the last ones).
    """

    mode: TruncationMode | None
    max_context_len: int | None = None
    n_tokens_per_image: int | None = None
    images_total: int = Field(ge=0, description="Images the prompt is built from (tiles in combined mode).")
    images_kept: int = Field(ge=0)
    images_dropped_budget: int = Field(default=0, ge=0, description="Dropped because the context was full.")
    images_unpaired: int = Field(default=0, ge=0, description="Dropped for lack of a placeholder slot.")
    pieces_total: int = Field(ge=1, description="Text pieces of the context (split at image placeholders).")
    pieces_kept: int = Field(ge=0)
    piece_cut: bool = Field(default=False, description="The earliest kept piece lost its beginning.")
    pieces_changed: int = Field(
        default=0, ge=0, description="Kept pieces whose text differs from the original (paper round trip)."
    )
    instruction_tokens: int | None = None
    text_tokens_total: int | None = None
    text_tokens_kept: int | None = None
    image_tokens_kept: int | None = None

    @property
    def text_tokens_dropped(self) -> int | None:
        if self.text_tokens_total is None or self.text_tokens_kept is None:
            return None
        return self.text_tokens_total - self.text_tokens_kept

    @property
    def truncated(self) -> bool:
        """Whether the budget removed anything (images, pieces or tokens)."""
        return bool(self.images_dropped_budget or self.pieces_kept < self.pieces_total or self.piece_cut)


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
    truncation: TruncationRecord | None = Field(
        default=None, description="What the model's context let through (null: made before regimes)."
    )

    @model_validator(mode="after")
    def _one_hash_per_image(self) -> PreparedSample:
        """Inference re-checks each image against its hash, so they must pair up."""
        if len(self.image_sha256) != len(self.images):
            raise ValueError(f"{len(self.images)} images but {len(self.image_sha256)} image_sha256 entries")
        return self

    @property
    def prompt(self) -> str:
        """Final text as the official code joins it."""
        return f"{self.instruction}\n{self.context}"


class GoldSample(Spec):
    """What scoring reads of a sample, taken from the task JSON alone: no prompt built, no image read.

    Official outputs are judged against it when the run has no prepared samples (the images, which
    preprocess needs, are absent); the official evaluator itself reads no more than this.
    """

    task: str
    mode: Mode
    sample_id: int
    question_type: QuestionType
    choices: tuple[str, ...] | None
    labelled_choices: bool = True
    response: str = Field(description="The gold answer.")
    image_quantity_level: QuantityLevel
    n_images: int = Field(description="Images of the sample (its images_path entries).")


ScoredSample = PreparedSample | GoldSample
"""What an answer is judged against: a prepared sample (prompt rebuilt) or the task JSON's gold alone."""


class FailureKind(StrEnum):
    OOM = "oom"
    API_ERROR = "api_error"
    TIMEOUT = "timeout"
    CONTEXT_OVERFLOW = "context_overflow"
    ADAPTER_ERROR = "adapter_error"


class WindowExcess(Spec):
    """How far a sample's input went past the model's window when it was generated anyway, as the
    official code generated every sample without checking (``context_overflow: generate``)."""

    input_tokens: int | None = Field(description="The model input's tokens (template and image tokens in).")
    max_context_len: int | None
    tokens_over: int = Field(ge=0, description="input_tokens - max_context_len; 0 when within or unknown.")
    images: int = Field(ge=0, description="Images the model received.")
    max_images: int | None
    images_over: int = Field(ge=0, description="images - max_images; 0 when within or no limit.")


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
    batch_size: int | None = Field(default=None, description="Samples per generate call that answered it.")
    cost_usd: float | None = Field(default=None, description="From token counts and the spec's prices.")
    over_window: WindowExcess | None = Field(
        default=None, description="Set when the input exceeded the model's window and was generated anyway."
    )


JudgmentStatus = Literal["scored", "missing", "failed"]


class Judgment(Spec):
    """One sample's score under one scorer; ``status`` says why a sample has no score."""

    task: str
    mode: Mode
    model: str
    sample_id: int
    scorer: str
    status: JudgmentStatus
    failure: FailureKind | None = Field(default=None, description="Why a failed sample has no answer.")
    extracted: str | None = None
    score: float | None = None
    image_quantity_level: QuantityLevel
    prompt_rebuilt: bool = Field(
        default=True,
        description="false: judged against the task JSON alone (official outputs, no prompt rebuilt).",
    )
