"""Truncation: how much of each sample a model actually saw, per task, from the prepared samples' records.

Each model reads the prepared file of its input regime (its context length, tokens per image and
tokenizer); every prepared sample there carries a ``TruncationRecord`` of what the budget let through.
The report sums those records: the share of images kept and the share of context tokens kept (text
plus image tokens; the instruction is always kept and left out). Files made before the records
existed, or absent ones, show as "not recorded". Beside them, every model's context budget: each number
with its source (or why it is unknown), and per mode whether a budget was applied or why not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from milebench.benchmarks.milebench.plan import applies
from milebench.benchmarks.milebench.preprocess.regime import Regime, model_regime
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.report.evidence import Evidence
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.spec.context import ContextSource
from milebench.spec.model import ImageInput, ModelSpec

BUDGET_LABELS: tuple[tuple[str, str], ...] = (
    ("max_context_len", "Context (tokens)"),
    ("n_tokens_per_image", "Tokens per image"),
    ("max_images", "Max images"),
)
"""(ModelSpec field, header) of the settings a budget table shows."""


@dataclass(frozen=True)
class SeenShare:
    """Sums of the truncation records of a set of samples."""

    samples: int
    truncated: int
    images_total: int
    images_kept: int
    tokens_total: int | None
    """Context tokens before the cut (text + images); None when no budget counted tokens."""
    tokens_kept: int | None

    @property
    def images_share(self) -> float | None:
        return self.images_kept / self.images_total if self.images_total else None

    @property
    def tokens_share(self) -> float | None:
        if self.tokens_total is None or self.tokens_kept is None or not self.tokens_total:
            return None
        return self.tokens_kept / self.tokens_total

    def __add__(self, other: SeenShare) -> SeenShare:
        def both(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a + b

        return SeenShare(
            self.samples + other.samples,
            self.truncated + other.truncated,
            self.images_total + other.images_total,
            self.images_kept + other.images_kept,
            both(self.tokens_total, other.tokens_total),
            both(self.tokens_kept, other.tokens_kept),
        )


def seen_share(samples: Sequence[PreparedSample] | None) -> SeenShare | None:
    """Sums over samples; None when the file is absent or a sample has no truncation record."""
    if samples is None or any(s.truncation is None for s in samples):
        return None
    total = SeenShare(0, 0, 0, 0, 0, 0)
    for s in samples:
        r = s.truncation
        assert r is not None
        counted = r.text_tokens_total is not None and r.text_tokens_kept is not None
        per_image = r.n_tokens_per_image or 0
        total += SeenShare(
            samples=1,
            truncated=int(r.truncated),
            images_total=r.images_total,
            images_kept=r.images_kept,
            tokens_total=(r.text_tokens_total or 0) + per_image * r.images_total if counted else None,
            tokens_kept=(r.text_tokens_kept or 0) + (r.image_tokens_kept or 0) if counted else None,
        )
    return total


@dataclass(frozen=True)
class TruncationRow:
    model: str
    display_name: str
    regime: str
    regime_label: str
    """The regime in words (``Regime.label``); the id is its tooltip."""
    tasks: dict[str, SeenShare | None]

    @property
    def overall(self) -> SeenShare | None:
        """All tasks together; None unless every task has records."""
        shares = list(self.tasks.values())
        if not shares or any(s is None for s in shares):
            return None
        total = SeenShare(0, 0, 0, 0, 0, 0)
        for share in shares:
            assert share is not None
            total += share
        return total


@dataclass(frozen=True)
class TruncationTable:
    mode: Mode
    tasks: list[tuple[str, str]]
    """(task name, display name) in table order."""
    rows: list[TruncationRow]


def truncation_tables(
    specs: Specs, run: RunSpec, tasks: Sequence[TaskSpec], evidence: Evidence
) -> list[TruncationTable]:
    tables = []
    for mode in run.modes:
        mode_tasks = [t for t in tasks if applies(t, mode)]
        rows = []
        for model in run.models:
            regime = model_regime(specs, run, model, mode)
            rows.append(
                TruncationRow(
                    model=model,
                    display_name=specs.models[model].display_name,
                    regime=regime.id,
                    regime_label=regime.label,
                    tasks={
                        t.name: seen_share(evidence.prepared(t.name, mode, regime.id)) for t in mode_tasks
                    },
                )
            )
        tables.append(TruncationTable(mode, [(t.name, t.display_name) for t in mode_tasks], rows))
    return tables


@dataclass(frozen=True)
class BudgetSetting:
    """One context setting of a model: its value (None: unknown or no limit) and where it comes from."""

    key: str
    label: str
    value: int | None
    source: ContextSource | None


@dataclass(frozen=True)
class ModelBudget:
    model: str
    display_name: str
    settings: tuple[BudgetSetting, ...]
    applied: dict[Mode, str | None]
    """Per mode of the run: None when the budget cut the prompts, else why no budget applied."""


def why_no_budget(spec: ModelSpec, regime: Regime, mode: Mode) -> str | None:
    """Why a model's prompts in ``mode`` were not cut to a budget; None when they were."""
    if regime.budgeted:
        return None
    if spec.builtin:
        return "built-in baseline"
    combined = mode is Mode.COMBINED_IMAGE or spec.image_input is ImageInput.COMBINED
    needed = ("max_context_len",) if combined else ("max_context_len", "n_tokens_per_image")
    unknown = [name for name in needed if getattr(spec, name) is None]
    if unknown:
        return "unknown " + " and ".join(unknown)
    return "no tokenizer to count with"


def budget_rows(specs: Specs, run: RunSpec) -> list[ModelBudget]:
    """Every run model's context settings with their sources, and per mode whether they were applied."""
    rows = []
    for name in run.models:
        spec = specs.models[name]
        settings = tuple(
            BudgetSetting(field, label, getattr(spec, field), getattr(spec.context_sources, field))
            for field, label in BUDGET_LABELS
        )
        applied = {
            mode: why_no_budget(spec, model_regime(specs, run, name, mode), mode) for mode in run.modes
        }
        rows.append(ModelBudget(name, spec.display_name, settings, applied))
    return rows
