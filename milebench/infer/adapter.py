"""What the engine needs from a model: answers for a batch of prepared samples."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

from milebench.paths import RunPaths
from milebench.records import PreparedSample
from milebench.spec.model import ModelSpec


class AdapterError(RuntimeError):
    """A model spec that cannot be run by this kit; the message names the spec."""


class TokenUsage(NamedTuple):
    input_tokens: int | None
    output_tokens: int | None


@runtime_checkable
class Adapter(Protocol):
    """Turns prepared samples into answers; constructed as ``cls(spec, paths, data_root)``.

    ``version`` enters every cache key: change it whenever the same input could give another answer.
    """

    version: str

    def __init__(self, spec: ModelSpec, paths: RunPaths, data_root: Path) -> None: ...

    def generate(self, samples: Sequence[PreparedSample]) -> list[str]:
        """One answer per sample, in order."""
        ...


@runtime_checkable
class ReportsUsage(Protocol):
    """Adapters that know token counts expose them for their latest ``generate`` call."""

    def last_usage(self) -> list[TokenUsage]:
        """Token counts of the samples of the latest ``generate`` call, in order."""
        ...
