"""``milebench score``: judge one model's predictions for one task and mode, and write its task score."""

from __future__ import annotations

import argparse
import logging

from milebench.data.schema import quantity_level
from milebench.io import atomic_write_json, atomic_write_jsonl
from milebench.paths import RunPaths
from milebench.plan import applies
from milebench.records import Judgment, Prediction, PreparedSample
from milebench.score.aggregate import TaskScore, summarise
from milebench.score.inputs import read_predictions, read_prepared
from milebench.score.paper import SCORER_NAME, judge
from milebench.spec.base import SpecError
from milebench.spec.registry import load_specs
from milebench.spec.run import Mode
from milebench.spec.task import TaskSpec

log = logging.getLogger(__name__)


def judge_sample(task: TaskSpec, model: str, sample: PreparedSample, pred: Prediction | None) -> Judgment:
    """One judgment; a missing or failed prediction is recorded with its status and never scored.

    The level is derived from the sample's image count, as the evaluator does, not read from the data.
    """
    status, extracted, score = "missing", None, None
    if pred is not None and (pred.failure is not None or pred.response is None):
        status = "failed"
    elif pred is not None and pred.response is not None:
        status = "scored"
        extracted, score = judge(task, sample, pred.response)
    return Judgment(
        task=task.name,
        mode=sample.mode,
        model=model,
        sample_id=sample.sample_id,
        scorer=SCORER_NAME,
        status=status,
        extracted=extracted,
        score=score,
        image_quantity_level=quantity_level(sample.n_images),
    )


def score_task(
    task: TaskSpec, model: str, mode: Mode, samples: list[PreparedSample], preds: dict[int, Prediction]
) -> tuple[list[Judgment], TaskScore]:
    judgments = [judge_sample(task, model, s, preds.get(s.sample_id)) for s in samples]
    unknown = sorted(set(preds) - {s.sample_id for s in samples})
    if unknown:
        log.warning(
            "%s/%s/%s: ignoring predictions of unknown sample ids %s", model, mode, task.name, unknown
        )
    return judgments, summarise(task.name, model, mode, SCORER_NAME, judgments)


def score(args: argparse.Namespace) -> int:
    specs = load_specs(args.specs)
    run = specs.run(args.run)
    run_file = specs.root / "runs" / f"{run.name}.yaml"
    mode = Mode(args.mode)
    problems = []
    if args.model not in run.models:
        problems.append(("models", f"model {args.model!r} is not part of run {run.name!r}"))
    if args.task not in {t.name for t in specs.run_tasks(run)}:
        problems.append(("tasks", f"task {args.task!r} is not part of run {run.name!r}"))
    elif not applies(specs.tasks[args.task], mode):
        problems.append(("modes", f"task {args.task!r} has no {mode.value} set"))
    if problems:
        raise SpecError(run_file, problems)

    task = specs.tasks[args.task]
    paths = RunPaths.for_run(run)
    samples = read_prepared(paths.prepared(task.name, mode))
    preds = read_predictions(paths.predictions(args.model, task.name, mode), task.name, args.model, mode)
    judgments, task_score = score_task(task, args.model, mode, samples, preds)

    atomic_write_jsonl(
        paths.judgments(args.model, task.name, mode), [j.model_dump(mode="json") for j in judgments]
    )
    atomic_write_json(paths.task_score(args.model, task.name, mode), task_score.model_dump(mode="json"))
    log.info(
        "%s %s %s: score %s over %d/%d samples (%d missing, %d failed)",
        args.model,
        task.name,
        mode.value,
        "n/a" if task_score.score is None else f"{task_score.score:.2f}",
        task_score.n_scored,
        task_score.n,
        task_score.n_missing,
        task_score.n_failed,
    )
    return 0
