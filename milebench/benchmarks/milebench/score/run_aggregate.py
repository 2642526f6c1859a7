"""A run's final numbers: every model's columns with intervals, coverage and failures, built from its files.

This is the one place that decides whether a run's tables may be built: a run with a missing score
file, a missing prediction or a failed one is refused (``IncompleteError`` names each incomplete cell
and its samples) unless the run spec sets ``allow_incomplete: true``; then every number carries the
coverage it rests on. Every column divides by the official denominator (a missing or failed sample
counts as wrong), its interval resamples the same samples, and the scored-only variant stands beside.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from milebench.benchmarks.milebench.data.schema import QuantityLevel
from milebench.benchmarks.milebench.paper import load_paper
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import applies
from milebench.benchmarks.milebench.score.aggregate import (
    OVERALL_REAL,
    Coverage,
    Denominator,
    LevelScore,
    TaskScore,
    column_tasks,
    coverage,
    pooled_levels,
)
from milebench.benchmarks.milebench.score.run_files import RunFiles
from milebench.benchmarks.milebench.score.uncertainty import Estimate, bootstrap_table, point_columns
from milebench.benchmarks.milebench.score.verdict import Verdict, build_verdict
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.run import Mode, RunSpec, has_verdict
from milebench.benchmarks.milebench.spec.samples import expected_samples
from milebench.benchmarks.milebench.spec.task import Category, TaskSpec
from milebench.errors import KitError
from milebench.infer.records import FailureKind
from milebench.io import atomic_write_json
from milebench.record_files import RecordError
from milebench.score.registry import DEFAULT_SCORER, variant_scorers
from milebench.spec.base import Spec
from milebench.stage_inputs import MissingInput, command

log = logging.getLogger(__name__)

SHOWN_IDS = 20
"""Sample ids listed per cell in an incompleteness message; the rest are counted."""
AGGREGATE_FORMAT: Literal[2] = 2
"""2: every variant scorer's columns under ``variants``; 1 (no ``format``): the standard scorer's alone,
as ``standard`` and ``scorer_difference``, read as that one variant."""


class IncompleteCell(Spec):
    """A (model, task, mode) cell that lacks a score file or has missing or failed samples."""

    model: str
    task: str
    mode: Mode
    score_file: bool = Field(description="Whether the task score file exists.")
    missing_ids: tuple[int, ...] = ()
    failed_ids: tuple[int, ...] = ()
    failures: dict[FailureKind, int] = Field(default_factory=dict)

    def describe(self) -> str:
        where = f"{self.model}/{self.mode.value}/{self.task}"
        if not self.score_file:
            return f"{where}: no task score file"
        parts = [
            f"{label} samples {_ids(ids)}"
            for label, ids in (("missing", self.missing_ids), ("failed", self.failed_ids))
            if ids
        ]
        if self.failures:
            parts.append("(" + ", ".join(f"{k.value}: {n}" for k, n in self.failures.items()) + ")")
        return f"{where}: " + " ".join(parts)


def _ids(ids: Sequence[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:SHOWN_IDS])
    return f"[{shown}{f', ... {len(ids) - SHOWN_IDS} more' if len(ids) > SHOWN_IDS else ''}]"


class IncompleteError(KitError, ValueError):
    """Final tables were asked of a run whose predictions are incomplete and that does not allow it."""

    def __init__(self, run: str, cells: Sequence[IncompleteCell]) -> None:
        self.cells = tuple(cells)
        listing = "\n".join(f"  {c.describe()}" for c in cells)
        super().__init__(
            f"run {run!r} has {len(cells)} incomplete cell(s); final tables are refused. Complete the "
            f"predictions, or set `allow_incomplete: true` in specs/runs/{run}.yaml to build them with "
            f"coverage shown.\n{listing}"
        )


class VariantColumns(Spec):
    """One model's columns under a scorer other than the default, and how far it moves each task."""

    columns: dict[str, float | None] | None = Field(
        description="The same columns under this scorer; null when no sample was judged by it."
    )
    difference: dict[str, float | None] = Field(description="Per task: this scorer minus paper.")


class ModelAggregate(Spec):
    """One model in one mode: every main-table column with its interval, coverage and scorer gap."""

    model: str
    mode: Mode
    scorer: str
    denominator: Denominator = Field(description="What ``columns`` divide by: the official denominator.")
    columns: dict[str, Estimate] = Field(
        description="Task, group and overall columns (x100): every expected sample counts, a missing or "
        "failed one as 0; the interval resamples the same samples."
    )
    scored_only: dict[str, float | None] = Field(
        description="Variant scored-only: the same columns over scored samples only (a failure cannot lower "
        "them), shown beside the official ones, never instead."
    )
    column_coverage: dict[str, float | None] = Field(description="Scored / expected samples per column.")
    variants: dict[str, VariantColumns] = Field(
        description="Each registered scorer but the default, by name."
    )
    levels: dict[QuantityLevel, LevelScore] = Field(description="Accuracy per image-quantity level (x100).")
    coverage: Coverage
    coverage_by_category: dict[Category, Coverage]
    failures: dict[FailureKind, int]

    @model_validator(mode="before")
    @classmethod
    def _format_1(cls, data: object) -> object:
        """Format 1 held the standard scorer alone: read as that one variant."""
        if isinstance(data, dict) and "scorer_difference" in data:
            rest = {k: v for k, v in data.items() if k not in ("standard", "scorer_difference")}
            standard = {"columns": data.get("standard"), "difference": data["scorer_difference"]}
            return {**rest, "variants": {"standard": standard}}
        return data


class AdversarialDelta(Spec):
    """Overall Real. on the regular set minus on the adversarial set, as the contamination table has it."""

    model: str
    regular: Estimate
    adversarial: Estimate
    delta: float | None


class RunAggregate(Spec):
    format: Literal[2] = Field(default=AGGREGATE_FORMAT, description="Format version (AGGREGATE_FORMAT).")
    run: str
    complete: bool
    allow_incomplete: bool
    scorer: str
    denominator: Denominator
    resamples: int
    seed: int
    confidence: float
    incomplete: tuple[IncompleteCell, ...]
    models: tuple[ModelAggregate, ...]
    adversarial: tuple[AdversarialDelta, ...]

    @model_validator(mode="before")
    @classmethod
    def _format_1(cls, data: object) -> object:
        """A file without ``format`` is format 1 (its models are read by ModelAggregate's reader)."""
        if isinstance(data, dict) and "format" not in data:
            return {"format": AGGREGATE_FORMAT, **data}
        return data

    def model(self, model: str, mode: Mode) -> ModelAggregate:
        """One model's columns in one mode; a ``KeyError`` names what the aggregate lacks."""
        for found in self.models:
            if (found.model, found.mode) == (model, mode):
                return found
        raise KeyError(f"{model}/{mode.value}")


def incomplete_cells(run: RunSpec, run_tasks: Sequence[TaskSpec], files: RunFiles) -> list[IncompleteCell]:
    """Every cell of the run without a score file or with a missing or failed sample."""
    cells = []
    for model in run.models:
        for mode in run.modes:
            for task in run_tasks:
                if not applies(task, mode):
                    continue
                found = files.task_score(model, task.name, mode)
                if found is None:
                    cells.append(IncompleteCell(model=model, task=task.name, mode=mode, score_file=False))
                elif found.n_scored < found.n:
                    cells.append(
                        IncompleteCell(
                            model=model,
                            task=task.name,
                            mode=mode,
                            score_file=True,
                            missing_ids=found.missing_ids,
                            failed_ids=found.failed_ids,
                            failures=found.failures,
                        )
                    )
    return cells


def require_scores(run: RunSpec, run_tasks: Sequence[TaskSpec], files: RunFiles) -> None:
    """A run none of whose cells has a task score was never scored: ``MissingInput``, not a table."""
    if not any(
        files.task_score(model, task.name, mode) is not None
        for model in run.models
        for mode in run.modes
        for task in run_tasks
        if applies(task, mode)
    ):
        made_by = command("score", run=run.name, model="<model>", task="<Task>", mode="<mode>")
        raise MissingInput(files.paths.out / "scores", f"task scores of run {run.name!r}", made_by)


def require_complete(run: RunSpec, cells: Sequence[IncompleteCell]) -> None:
    """Raise ``IncompleteError`` for incomplete cells unless the run spec allows them."""
    if cells and not run.allow_incomplete:
        raise IncompleteError(run.name, cells)
    if cells:
        log.warning("run %s: %d incomplete cell(s), allowed by allow_incomplete", run.name, len(cells))


def _category_coverage(
    scores: Mapping[str, TaskScore | None], tasks: Sequence[TaskSpec], expected: Mapping[str, int]
) -> dict[Category, Coverage]:
    return {
        category: coverage(
            (scores[t.name], expected[t.name]) for t in tasks if t.category is category and t.name in scores
        )
        for category in Category
        if any(t.category is category and t.name in scores for t in tasks)
    }


def model_aggregate(
    model: str,
    mode: Mode,
    run_tasks: Sequence[TaskSpec],
    all_tasks: Sequence[TaskSpec],
    files: RunFiles,
    resamples: int,
    seed: int,
    confidence: float,
    expected: Mapping[str, int],
) -> ModelAggregate:
    """One model's columns in one mode; ``expected`` is each task's expected sample count (coverage)."""
    tasks = [t for t in run_tasks if applies(t, mode)]
    scores = {t.name: files.task_score(model, t.name, mode) for t in tasks}
    present = [s for s in scores.values() if s is not None]
    samples = files.samples(model, mode, tasks, DEFAULT_SCORER)
    columns = bootstrap_table(samples, all_tasks, resamples, seed, confidence)
    scored_only = files.samples(model, mode, tasks, DEFAULT_SCORER, Denominator.SCORED_ONLY)
    failures: dict[FailureKind, int] = {}
    for found in present:
        for kind, n in found.failures.items():
            failures[kind] = failures.get(kind, 0) + n

    def column_coverage(column: str) -> float | None:
        members = [(scores.get(t.name), expected[t.name]) for t in column_tasks(column, tasks)]
        return coverage(members).fraction if members else None

    return ModelAggregate(
        model=model,
        mode=mode,
        scorer=DEFAULT_SCORER,
        denominator=Denominator.EXPECTED,
        columns=columns,
        scored_only=point_columns(scored_only, all_tasks),
        column_coverage={column: column_coverage(column) for column in columns},
        variants={
            name: variant_columns(name, model, mode, tasks, all_tasks, files) for name in variant_scorers()
        },
        levels=pooled_levels(present),
        coverage=coverage((score, expected[name]) for name, score in scores.items()),
        coverage_by_category=_category_coverage(scores, tasks, expected),
        failures=failures,
    )


def variant_columns(
    scorer: str,
    model: str,
    mode: Mode,
    tasks: Sequence[TaskSpec],
    all_tasks: Sequence[TaskSpec],
    files: RunFiles,
) -> VariantColumns:
    """One model's columns in one mode under the variant ``scorer``, and its difference per task."""
    samples = files.samples(model, mode, tasks, scorer)
    scores = {t.name: files.task_score(model, t.name, mode) for t in tasks}
    return VariantColumns(
        columns=point_columns(samples, all_tasks) if samples else None,
        difference={name: s.difference(scorer) for name, s in scores.items() if s is not None},
    )


def adversarial_deltas(models: Sequence[ModelAggregate]) -> list[AdversarialDelta]:
    """Regular minus adversarial Overall Real. for every model run in both modes."""
    by_key = {(m.model, m.mode): m for m in models}
    deltas = []
    for m in models:
        adv = by_key.get((m.model, Mode.ADVERSARIAL))
        if m.mode is not Mode.MULTI_IMAGE or adv is None:
            continue
        regular, adversarial = m.columns[OVERALL_REAL], adv.columns[OVERALL_REAL]
        delta = None
        if regular.value is not None and adversarial.value is not None:
            delta = regular.value - adversarial.value
        deltas.append(AdversarialDelta(model=m.model, regular=regular, adversarial=adversarial, delta=delta))
    return deltas


def aggregate_run(
    specs: Specs,
    run: RunSpec,
    paths: RunPaths,
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> RunAggregate:
    """The run's aggregate; raises ``IncompleteError`` for an incomplete run without ``allow_incomplete``."""
    files = RunFiles(paths)
    run_tasks = specs.run_tasks(run)
    cells = incomplete_cells(run, run_tasks, files)
    require_complete(run, cells)
    all_tasks = list(specs.tasks.values())
    expected = {t.name: expected_samples(t, run) for t in run_tasks}
    models = [
        model_aggregate(model, mode, run_tasks, all_tasks, files, resamples, seed, confidence, expected)
        for model in run.models
        for mode in run.modes
    ]
    return RunAggregate(
        run=run.name,
        complete=not cells,
        allow_incomplete=run.allow_incomplete,
        scorer=DEFAULT_SCORER,
        denominator=Denominator.EXPECTED,
        resamples=resamples,
        seed=seed,
        confidence=confidence,
        incomplete=tuple(cells),
        models=tuple(models),
        adversarial=tuple(adversarial_deltas(models)),
    )


def run_verdict(
    specs: Specs,
    run: RunSpec,
    paths: RunPaths,
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Verdict:
    """The verdict of the run's multi-image scores; refused like the aggregate for an incomplete run."""
    files = RunFiles(paths)
    run_tasks = specs.run_tasks(run)
    require_complete(run, incomplete_cells(run, run_tasks, files))
    samples = {
        model: files.samples(model, Mode.MULTI_IMAGE, run_tasks, DEFAULT_SCORER) for model in run.models
    }
    all_tasks = list(specs.tasks.values())
    return build_verdict(
        run, load_paper(specs), all_tasks, samples, DEFAULT_SCORER, resamples, seed, confidence
    )


def aggregate(args: argparse.Namespace) -> int:
    """``milebench aggregate``: write aggregate.json (and verdict.json when the run has multi-image)."""
    specs = load_specs(args.specs)
    return write_aggregate(specs, specs.run(args.run), args.resamples, args.seed, args.root)


def write_aggregate(
    specs: Specs, run: RunSpec, resamples: int = 2000, seed: int = 0, root: Path = Path(".")
) -> int:
    """The run's aggregate.json and verdict.json; 1 (logged) for an incomplete run that does not allow it."""
    paths = RunPaths.for_run(run, base=root)
    try:
        require_scores(run, specs.run_tasks(run), RunFiles(paths))
        result = aggregate_run(specs, run, paths, resamples, seed)
        verdict = run_verdict(specs, run, paths, resamples, seed) if has_verdict(run) else None
    except (IncompleteError, RecordError) as err:
        log.error("%s", err)
        return 1
    atomic_write_json(paths.aggregate_json, result.model_dump(mode="json"))
    log.info("wrote %s", paths.aggregate_json)
    if verdict is not None:
        atomic_write_json(paths.verdict_json, verdict.model_dump(mode="json"))
        counts = ", ".join(f"{n} {state}" for state, n in verdict.table.counts.items() if n)
        log.info("wrote %s: %s (tolerance %s)", paths.verdict_json, counts or "no cells", verdict.tolerance)
    return 0
