"""Skipped samples and preprocess totals, per task and input regime, from the preprocess manifests.

With ``skip_bad_samples: true`` a bad sample (unreadable image, bad instruction index) is left out of the
prepared file and recorded in the manifest beside it, with the reason. Such a sample is in no model's
expected set, so coverage cannot show it: this section does. A manifest also counts what the context
budget cut; the totals are shown per regime. An absent manifest shows as "not recorded".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import applies
from milebench.benchmarks.milebench.preprocess.prepare import PrepareManifest, SkippedSample
from milebench.benchmarks.milebench.preprocess.regime import Regime, run_regimes
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.errors import KitError


class ManifestError(KitError, ValueError):
    """A preprocess manifest exists but does not hold a valid manifest."""


def read_manifest(path: Path) -> PrepareManifest | None:
    """The manifest at ``path``; None when the file is absent."""
    if not path.exists():
        return None
    try:
        return PrepareManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ManifestError(f"{path}: not a valid preprocess manifest: {err}") from None


@dataclass(frozen=True)
class SkippedTask:
    """One task's skipped samples in one regime."""

    task: str
    display_name: str
    n_samples: int
    skipped: tuple[SkippedSample, ...]


@dataclass(frozen=True)
class RegimeTotals:
    """One input regime of one mode: the models reading it and its manifests summed over tasks."""

    regime: str
    regime_label: str
    """The regime in words (``Regime.label``); the id is its tooltip."""
    models: list[str]
    """Display names of the run's models that read this regime."""
    tasks_expected: int
    tasks_recorded: int
    """Tasks whose manifest exists; the totals below sum those only."""
    n_samples: int
    n_prepared: int
    n_truncated: int
    images_dropped_budget: int
    images_unpaired: int
    skipped: list[SkippedTask]
    """Tasks with at least one skipped sample, in table order."""

    @property
    def n_skipped(self) -> int:
        return sum(len(t.skipped) for t in self.skipped)

    @property
    def complete(self) -> bool:
        return self.tasks_recorded == self.tasks_expected


@dataclass(frozen=True)
class SkippedTable:
    mode: Mode
    regimes: list[RegimeTotals]

    @property
    def n_skipped(self) -> int:
        return sum(r.n_skipped for r in self.regimes)


def regime_totals(
    regime: Regime, models: list[str], tasks: Sequence[TaskSpec], mode: Mode, paths: RunPaths
) -> RegimeTotals:
    found = [(t, read_manifest(paths.prepared_manifest(t.name, mode, regime.id))) for t in tasks]
    recorded = [(t, m) for t, m in found if m is not None]
    return RegimeTotals(
        regime=regime.id,
        regime_label=regime.label,
        models=models,
        tasks_expected=len(tasks),
        tasks_recorded=len(recorded),
        n_samples=sum(m.n_samples for _, m in recorded),
        n_prepared=sum(m.n_prepared for _, m in recorded),
        n_truncated=sum(m.n_truncated for _, m in recorded),
        images_dropped_budget=sum(m.images_dropped_budget for _, m in recorded),
        images_unpaired=sum(m.images_unpaired for _, m in recorded),
        skipped=[
            SkippedTask(t.name, t.display_name, m.n_samples, m.skipped) for t, m in recorded if m.skipped
        ],
    )


def skipped_tables(
    specs: Specs, run: RunSpec, tasks: Sequence[TaskSpec], paths: RunPaths
) -> list[SkippedTable]:
    """Per mode, one entry per input regime the run's models read, in the order models first use them."""
    tables = []
    for mode in run.modes:
        mode_tasks = [t for t in tasks if applies(t, mode)]
        regimes = [
            regime_totals(regime, [specs.models[m].display_name for m in models], mode_tasks, mode, paths)
            for regime, models in run_regimes(specs, run, mode).values()
        ]
        tables.append(SkippedTable(mode, regimes))
    return tables
