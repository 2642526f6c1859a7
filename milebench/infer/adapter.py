"""What the engine needs from a model: answers for a batch of prepared samples."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

from milebench.paths import RunPaths
from milebench.records import FailureKind, PreparedSample
from milebench.spec.model import ModelSpec


class AdapterError(RuntimeError):
    """A model spec that cannot be run by this kit; the message names the spec."""


class InferenceError(RuntimeError):
    """A failure whose kind the adapter knows (timeout, context overflow, API error)."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class SampleFailure(NamedTuple):
    """Returned in place of an answer when one sample of a batch failed and the others did not."""

    kind: FailureKind
    detail: str


class TokenUsage(NamedTuple):
    input_tokens: int | None
    output_tokens: int | None
    seconds: float | None = None
    """The sample's own time when the adapter measured it (concurrent API requests)."""


@runtime_checkable
class Adapter(Protocol):
    """Turns prepared samples into answers; constructed as ``cls(spec, paths, data_root)``.

    ``version`` enters every cache key: change it whenever the same input could give another answer.
    """

    version: str

    def __init__(self, spec: ModelSpec, paths: RunPaths, data_root: Path) -> None: ...

    def generate(self, samples: Sequence[PreparedSample]) -> list[str | SampleFailure]:
        """One answer per sample, in order; a ``SampleFailure`` where only that sample failed."""
        ...


@runtime_checkable
class ReportsUsage(Protocol):
    """Adapters that know token counts expose them for their latest ``generate`` call."""

    def last_usage(self) -> list[TokenUsage]:
        """Token counts of the samples of the latest ``generate`` call, in order."""
        ...
