"""The Random baseline: a uniformly drawn option, the same one on every run."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import PreparedSample, option_label
from milebench.spec.model import ModelSpec
from milebench.spec.policy import RunPolicy

ADAPTER = {"kind": "random", "does": "generate", "entry": "RandomAdapter"}
"""What this module runs (milebench.spec.adapters)."""


class RandomAdapter:
    """Draw one option per sample from ``random.Random("<seed>:<task>:<sample_id>")``.

    The string seed is hashed by ``random`` itself (SHA-512), so draws do not depend on PYTHONHASHSEED,
    on batching or on sample order. Multiple choice with labelled options answers the option's letter
    (``"B"``), because the official scorer extracts letters and an option's text can be a substring of
    another option; unlabelled options (GPR1200) answer the option text, which the scorer matches.
    Open-ended samples answer ``""``, which every official scorer counts as wrong.
    """

    version = "1"

    def __init__(
        self, spec: ModelSpec, paths: RunPaths, data_root: Path, *, policy: RunPolicy | None = None
    ) -> None:
        self.seed = spec.generation.seed

    def answer(self, sample: PreparedSample) -> str:
        if not sample.choices:
            return ""
        rng = random.Random(f"{self.seed}:{sample.task}:{sample.sample_id}")
        index = rng.randrange(len(sample.choices))
        return option_label(index) if sample.labelled_choices else sample.choices[index]

    def generate(self, samples: Sequence[PreparedSample]) -> list[str]:
        return [self.answer(s) for s in samples]
