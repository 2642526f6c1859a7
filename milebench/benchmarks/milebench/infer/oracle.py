"""The oracle: answers with the gold response, an upper bound that checks the scoring path end to end."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.spec.model import ModelSpec
from milebench.spec.policy import RunPolicy

ADAPTER = {"kind": "oracle", "does": "generate", "entry": "OracleAdapter"}
"""What this module runs (milebench.spec.adapters)."""


class OracleAdapter:
    version = "1"

    def __init__(
        self, spec: ModelSpec, paths: RunPaths, data_root: Path, *, policy: RunPolicy | None = None
    ) -> None:
        """Needs nothing from its spec: the answer is in the sample."""

    def generate(self, samples: Sequence[PreparedSample]) -> list[str]:
        return [s.response for s in samples]
