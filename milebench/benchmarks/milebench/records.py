"""MileBench's records passed between stages: prepared samples, the gold read without a prompt, and per-sample
judgments."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from milebench.benchmarks.milebench.data.schema import QuantityLevel
from milebench.benchmarks.milebench.spec.run import Mode, TruncationMode
from milebench.benchmarks.milebench.spec.task import QuestionType
from milebench.infer.records import FailureKind
from milebench.record_files import read_records
from milebench.spec.base import Spec
from milebench.stage_inputs import command, require


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


def read_prepared(path: Path, made_by: str) -> list[PreparedSample]:
    """The prepared samples; ``made_by`` is the preprocess command line named when the file is absent."""
    return read_records(require(path, "prepared samples", made_by), PreparedSample)


def preprocess_command(run: str, task: str, mode: object, regime: str) -> str:
    """The command that writes one prepared file (``RunPaths.prepared``)."""
    return command("preprocess", run=run, task=task, mode=mode, regime=regime)
