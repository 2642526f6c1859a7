"""What the engine needs from a model: answers for a batch of prepared samples."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypedDict, runtime_checkable

from milebench.errors import KitError
from milebench.infer.records import FailureKind, ModelInput
from milebench.paths import ModelFolders
from milebench.spec.model import ModelSpec
from milebench.spec.policy import RunPolicy

FIRST_FAILURES = 5
"""A cell whose first this many answered samples all failed stops: the endpoint or the spec is wrong, and
every further sample would fail the same way (after its retries)."""


class AdapterError(KitError, RuntimeError):
    """A model spec that cannot be run by this kit; the message names the spec."""


class InferenceError(RuntimeError):
    """A failure whose kind the adapter knows (timeout, context overflow, API error)."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class ImageError(InferenceError):
    """One sample's image cannot be used (changed, unreadable, undecodable): that sample fails, the rest
    of its batch is answered."""

    def __init__(self, sample: ModelInput, image: str, problem: str) -> None:
        super().__init__(FailureKind.ADAPTER_ERROR, self.detail(sample, image, problem))
        self.sample_id = sample.sample_id

    @staticmethod
    def detail(sample: ModelInput, image: str, problem: str) -> str:
        return f"task {sample.task}, sample {sample.sample_id}: image {image} {problem}"


class SampleFailure(NamedTuple):
    """Returned in place of an answer when one sample of a batch failed and the others did not."""

    kind: FailureKind
    detail: str


class TokenUsage(NamedTuple):
    input_tokens: int | None
    output_tokens: int | None
    seconds: float | None = None
    """The sample's own time when the adapter measured it (concurrent API requests)."""


class AdapterOptions(TypedDict, total=False):
    """The keyword options of a transformers adapter's constructor, which a family's own passes on."""

    with_model: bool
    """False: load only what builds inputs (``render-input``), no weights."""
    policy: RunPolicy | None


@runtime_checkable
class Adapter(Protocol):
    """Turns prepared samples into answers; constructed as ``cls(spec, paths, data_root, policy=...)``, the
    job's ``RunPolicy`` (None: a run spec's defaults), which it reads its run settings from.

    ``version`` enters every cache key: change it whenever the same input could give another answer.
    """

    version: str

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, *, policy: RunPolicy | None = None
    ) -> None: ...

    def generate(self, samples: Sequence[ModelInput]) -> list[str | SampleFailure]:
        """One answer per sample, in order; a ``SampleFailure`` where only that sample failed."""
        ...


@runtime_checkable
class ReportsUsage(Protocol):
    """Adapters that know token counts expose them for their latest ``generate`` call."""

    def last_usage(self) -> list[TokenUsage]:
        """Token counts of the samples of the latest ``generate`` call, in order."""
        ...


@runtime_checkable
class BuildsInputs(Protocol):
    """Adapters whose input building (image decoding, the model's processor) is apart from generation,
    so the engine can build the next batch's inputs in a worker process while this batch generates.
    ``generate(samples)`` must equal ``answer(samples, encode(samples))``."""

    def encode(self, samples: Sequence[ModelInput]) -> Any:
        """The model inputs of a batch; runs in a worker process, so it must not touch the model."""
        ...

    def answer(self, samples: Sequence[ModelInput], inputs: Any) -> list[str | SampleFailure]:
        """``generate`` from inputs already built by ``encode``."""
        ...


@runtime_checkable
class Preflight(Protocol):
    """Adapters that can check, with one cheap request, that their endpoint is there before any sample
    is sent (API models); ``preflight`` raises ``AdapterError`` when it is not."""

    def preflight(self) -> None: ...


@runtime_checkable
class CountsCells(Protocol):
    """Adapters that count a cell's answers (API models stop sending once a cell's first samples all
    failed): told when the next cell of their job starts, so one cell's failures never stop another's."""

    def start_cell(self) -> None: ...


def failure_kind(err: Exception) -> FailureKind:
    """The adapter's own kind, or OOM when torch says so; torch is looked up, not imported, so
    torch-free adapters stay light."""
    if isinstance(err, InferenceError):
        return err.kind
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(err, torch.cuda.OutOfMemoryError):
        return FailureKind.OOM
    return FailureKind.ADAPTER_ERROR
