"""``milebench score``: judge one model's predictions for one task and mode, and write its task score."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from milebench.benchmarks.milebench.data.schema import quantity_level
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import applies
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.provenance import job_provenance, write_provenance
from milebench.benchmarks.milebench.records import (
    Judgment,
    JudgmentStatus,
    PreparedSample,
    ScoredSample,
    preprocess_command,
    read_prepared,
)
from milebench.benchmarks.milebench.score.aggregate import TaskScore, summarise
from milebench.benchmarks.milebench.score.inputs import read_predictions
from milebench.benchmarks.milebench.score.sample_log import write_sample_log
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.infer.records import Prediction
from milebench.io import atomic_write_json, atomic_write_jsonl
from milebench.provenance import utc_now
from milebench.score.registry import DEFAULT_SCORER, scorer_names
from milebench.score.registry import scorer as judge_of
from milebench.spec.base import SpecError
from milebench.spec.names import check_in_run

log = logging.getLogger(__name__)


def judge_sample(
    task: TaskSpec, model: str, sample: ScoredSample, pred: Prediction | None, scorer: str = DEFAULT_SCORER
) -> Judgment:
    """One judgment; a missing or failed prediction is recorded with its status and never scored.

    The level is derived from the sample's image count, as the evaluator does, not read from the data.
    A judgment against the task JSON's gold alone says that no prompt was rebuilt for it.
    """
    status: JudgmentStatus = "missing"
    extracted, score = None, None
    if pred is not None and (pred.failure is not None or pred.response is None):
        status = "failed"
    elif pred is not None and pred.response is not None:
        status = "scored"
        extracted, score = judge_of(scorer)(task, sample, pred.response)
    return Judgment(
        task=task.name,
        mode=sample.mode,
        model=model,
        sample_id=sample.sample_id,
        scorer=scorer,
        status=status,
        failure=pred.failure if status == "failed" and pred is not None else None,
        extracted=extracted,
        score=score,
        image_quantity_level=quantity_level(sample.n_images),
        prompt_rebuilt=isinstance(sample, PreparedSample),
    )


def score_task(
    task: TaskSpec, model: str, mode: Mode, samples: Sequence[ScoredSample], preds: dict[int, Prediction]
) -> tuple[list[Judgment], TaskScore]:
    """Judgments under every scorer (the default's first) and the task score holding all of them."""
    by_scorer = {name: [judge_sample(task, model, s, preds.get(s.sample_id), name) for s in samples]
                 for name in scorer_names()}  # fmt: skip
    unknown = sorted(set(preds) - {s.sample_id for s in samples})
    if unknown:
        log.warning(
            "%s/%s/%s: ignoring predictions of unknown sample ids %s", model, mode, task.name, unknown
        )
    variants = {name: rows for name, rows in by_scorer.items() if name != DEFAULT_SCORER}
    task_score = summarise(task.name, model, mode, DEFAULT_SCORER, by_scorer[DEFAULT_SCORER], variants)
    return [j for rows in by_scorer.values() for j in rows], task_score


def write_scores(paths: RunPaths, judgments: list[Judgment], task_score: TaskScore) -> None:
    """Judgments (JSONL, every scorer) and the task score (JSON), each written atomically."""
    model, task, mode = task_score.model, task_score.task, task_score.mode
    atomic_write_jsonl(paths.judgments(model, task, mode), [j.model_dump(mode="json") for j in judgments])
    atomic_write_json(paths.task_score(model, task, mode), task_score.model_dump(mode="json"))
    log.info(
        "%s %s %s: score %s (%s) over %d/%d samples (%d missing, %d failed)",
        model,
        task,
        mode.value,
        _points(task_score.score),
        ", ".join(f"{name} {_points(variant.score)}" for name, variant in task_score.variants.items()),
        task_score.n_scored,
        task_score.n,
        task_score.n_missing,
        task_score.n_failed,
    )


def _points(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def score_one_task(args: argparse.Namespace) -> int:
    """Score one task's predictions (``milebench score`` without ``--official-outputs``)."""
    if args.task is None:
        raise SystemExit("milebench score: --task is required (or --official-outputs DIR)")
    started = utc_now()
    specs = load_specs(args.specs)
    run = specs.run(args.run)
    run_file = specs.root / "runs" / f"{run.name}.yaml"
    mode = Mode(args.mode)
    check_in_run("model", args.model, run.name, run.models, run_file)
    check_in_run("task", args.task, run.name, {t.name for t in specs.run_tasks(run)}, run_file)
    if not applies(specs.tasks[args.task], mode):
        raise SpecError(run_file, [("modes", f"task {args.task!r} has no {mode.value} set")])

    task = specs.tasks[args.task]
    paths = RunPaths.for_run(run, base=args.root)
    regime = model_regime(specs, run, args.model, mode).id
    made_by = preprocess_command(run.name, task.name, mode, regime)
    samples = read_prepared(paths.prepared(task.name, mode, regime), made_by)
    preds = read_predictions(paths.predictions(args.model, task.name, mode), task.name, args.model, mode)
    judgments, task_score = score_task(task, args.model, mode, samples, preds)
    write_scores(paths, judgments, task_score)
    write_sample_log(paths.samples(args.model, task.name, mode), samples, preds, judgments)
    record = job_provenance(
        stage="score",
        specs=specs,
        run=run,
        model=specs.models[args.model],
        task=task.name,
        mode=mode.value,
        outputs=tuple(
            paths.relative(p)
            for p in (
                paths.judgments(args.model, task.name, mode),
                paths.task_score(args.model, task.name, mode),
                paths.samples(args.model, task.name, mode),
            )
        ),
        fetch_manifest=paths.fetch_manifest,
        started_at=started,
        prompt_rebuilt=task_score.prompt_rebuilt,
    )
    write_provenance(paths.score_provenance(args.model, task.name, mode), record)
    return 0
