"""The ``paper`` scorer: every sample judged exactly as the official ``evaluate.py`` judges it."""

from __future__ import annotations

from milebench.benchmarks.milebench.records import ScoredSample
from milebench.benchmarks.milebench.score.choice import extract_choice, option_key, option_map
from milebench.benchmarks.milebench.score.normalize import normalize
from milebench.benchmarks.milebench.score.rouge_l import rouge_l_f
from milebench.benchmarks.milebench.spec.task import ScorerKind, TaskSpec
from milebench.errors import KitError


class ScoringError(KitError, ValueError):
    """A sample the evaluator cannot judge (its own assertion fails); names the task and sample."""


def _choice(task: TaskSpec, sample: ScoredSample, prediction: str) -> tuple[str, float]:
    if not sample.choices:
        raise ScoringError(f"task {task.name} sample {sample.sample_id}: multi-choice sample has no choices")
    options = option_map(sample.choices)
    texts = list(options.values())
    gold = normalize(sample.response)
    if gold not in texts:
        raise ScoringError(
            f"task {task.name} sample {sample.sample_id}: gold answer {sample.response!r} is not one of "
            "its choices after normalisation"
        )
    gold_key = option_key(texts.index(gold))
    extracted = extract_choice(normalize(prediction), options)
    return extracted, float(extracted == gold_key)


def judge(task: TaskSpec, sample: ScoredSample, prediction: str) -> tuple[str | None, float]:
    """(extracted option key or None, score in [0, 1]) for one raw model response.

    The rule follows the task's official dispatch (``TaskSpec.scorer``); only the choice rule extracts.
    """
    if task.scorer is ScorerKind.CHOICE:
        return _choice(task, sample, prediction)
    gold = normalize(sample.response)
    answer = normalize(prediction)
    if task.scorer is ScorerKind.NEEDLE:
        return None, float(gold in answer.split())
    if task.scorer is ScorerKind.SUBSTRING:
        return None, float(gold in answer)
    try:
        return None, rouge_l_f(answer, gold)
    except ValueError as err:
        raise ScoringError(f"task {task.name} sample {sample.sample_id}: {err}") from None
