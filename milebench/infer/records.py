"""What the inference engine reads and writes: a model input, as any benchmark prepares it, and the
prediction or failure it makes of it."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from pydantic import Field

from milebench.spec.base import Spec

IMAGE_PLACEHOLDER = "<ImageHere>"
"""The model-neutral image placeholder (the official literal); adapters map it to their own token."""


class ModelInput(Protocol):
    """One sample as the engine and the adapters take it: a prompt with image placeholders and the image
    files, each with the hash it is checked against; a benchmark's prepared sample has these and more."""

    @property
    def task(self) -> str: ...

    @property
    def mode(self) -> str:
        """The way the task is put to the model (a benchmark's own names)."""
        ...

    @property
    def sample_id(self) -> int: ...

    @property
    def instruction(self) -> str: ...

    @property
    def context(self) -> str: ...

    @property
    def images(self) -> tuple[str, ...]:
        """Image paths relative to the data root."""
        ...

    @property
    def image_sha256(self) -> tuple[str, ...]: ...

    @property
    def prompt_sha256(self) -> str: ...

    @property
    def n_images(self) -> int:
        """Images of the sample before truncation or combining."""
        ...

    @property
    def prompt(self) -> str:
        """The final text the model is given."""
        ...


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
    mode: str = Field(description="The way the task was put to the model (a benchmark's own names).")
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
