"""Scoring speed: the kit's paper scorer against the official evaluator, on the same full-size predictions.

The prediction set has MileBench's size and task mix (each task's sample count from its spec, 6,440 in
all). Its samples are the mini-MileBench fixture's, prepared by the kit and repeated up to each task's
count with new ids; the answers are drawn, seeded, from the ways models answer (a letter, "The answer is
B.", the option text, a long ramble, an empty answer, the gold text with noise). The official
``evaluate.py`` is imported from a checkout given with ``--official`` (never copied into this
repository) and called the way its ``main`` calls it, one task per call. Every figure is printed with
its ratio to the official evaluator's rate, measured in the same run; the per-sample judgments of the
two must be identical (ROUGE-L as the evaluator writes it, rounded to 3 decimals; task means to 1e-9).
Peak memory is measured in a separate untimed pass with ``tracemalloc``.

Run: ``python benchmarks/score.py --official /path/to/MileBench [--repeats N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import math
import random
import sys
import tempfile
import time
import tracemalloc
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mini_inputs import FILLER_WORDS, bench_paths

from milebench.benchmarks.milebench.fixture.prepared import prepared_fixture
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.score.commands import score_task
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import QuestionType, TaskSpec
from milebench.infer.records import Prediction
from milebench.score.registry import DEFAULT_SCORER, scorer

FIXTURE_SAMPLES = 6
"""Fixture samples per task; they are repeated up to the task's real count."""
ROUNDING = 3
"""The official evaluator writes per-sample ROUGE-L rounded to this many decimals."""


@dataclass(frozen=True)
class TaskSet:
    """One task's samples and the answers to score."""

    task: TaskSpec
    samples: list[PreparedSample]
    answers: list[str]


def answer(rng: random.Random, sample: PreparedSample) -> str:
    """One answer in a style models write; about a third of the styles are right when the model is."""
    gold = sample.response
    ramble = " ".join(rng.choices(FILLER_WORDS, k=rng.randint(20, 120)))
    if sample.choices:
        index = rng.randrange(len(sample.choices))
        key, text = chr(65 + index % 26), sample.choices[index]
        styles = [key, f"{key}.", f"({key})", f"The answer is {key}.", text, f"{key}. {text}", gold,
                  f"{ramble} so the answer is {text}", "", f"Answer: {key}", ramble]  # fmt: skip
    else:
        words = gold.split()
        styles = [gold, f"The answer is {gold}.", " ".join(words[: max(1, len(words) // 2)]),
                  f"{ramble} {gold}", ramble, "", gold.upper(), f"{gold}, I think."]  # fmt: skip
    return rng.choice(styles)


def full_size(prepared: dict[str, list[PreparedSample]], tasks: list[TaskSpec], seed: int) -> list[TaskSet]:
    """Each task's fixture samples repeated (new ids) up to its real sample count, with seeded answers."""
    rng = random.Random(seed)
    sets = []
    for task in tasks:
        base = prepared[task.name]
        samples = [base[i % len(base)].model_copy(update={"sample_id": i}) for i in range(task.n_samples)]
        sets.append(TaskSet(task, samples, [answer(rng, s) for s in samples]))
    return sets


def load_official(checkout: Path) -> Any:
    """Import the official ``evaluate.py`` from a checkout; scikit-learn, imported but unused for
    scoring, is stood in for when absent."""
    if importlib.util.find_spec("sklearn") is None:
        stand_ins = {
            "sklearn": {},
            "sklearn.feature_extraction": {},
            "sklearn.feature_extraction.text": {"TfidfVectorizer": None},
            "sklearn.metrics": {},
            "sklearn.metrics.pairwise": {"cosine_similarity": None},
        }
        for name, attributes in stand_ins.items():
            module = types.ModuleType(name)
            module.__dict__.update(attributes)
            sys.modules.setdefault(name, module)
    spec = importlib.util.spec_from_file_location("official_evaluate", checkout / "evaluate.py")
    if spec is None or spec.loader is None or not (checkout / "evaluate.py").is_file():
        raise FileNotFoundError(f"{checkout / 'evaluate.py'}: not found (--official names the checkout)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def official_inputs(ts: TaskSet) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The task JSON fields and the ``pred.json`` records the official evaluator reads."""
    data = []
    for s in ts.samples:
        instance: dict[str, Any] = {"images_path": [f"{k}.jpg" for k in range(s.n_images)]}
        if s.choices is not None:
            instance["choice_list"] = list(s.choices)
        data.append(
            {
                "sample_id": s.sample_id,
                "task_instance": instance,
                "image_quantity_level": s.image_quantity_level,
            }
        )
    core = {"meta_data": {"question_type": ts.task.question_type.value}, "data": data}
    preds = [
        {"sample_id": s.sample_id, "gt_response": s.response, "pred_response": a}
        for s, a in zip(ts.samples, ts.answers, strict=True)
    ]
    return core, preds


@dataclass(frozen=True)
class Judged:
    """One task's per-sample scores and task score (a mean in [0, 1]) from one scorer."""

    samples: list[float]
    mean: float


def official_task(evaluator: Any, ts: TaskSet, core: dict[str, Any], preds: list[dict[str, Any]]) -> Judged:
    """Scores through the official dispatch (task name, then question type); ROUGE-L per sample is
    what the evaluator writes (rounded), its task score is unrounded."""
    name, scorer = ts.task.name, evaluator.Eval()
    with contextlib.redirect_stdout(io.StringIO()):
        if "NeedleInAHaystack" in name or "MMCoQA" in name:
            result, _ = scorer.evaluate_needle(preds, core, needle="NeedleInAHaystack" in name)
            return Judged([float(p["result"]) for p in preds], float(result["Accuracy"]))
        if ts.task.question_type is QuestionType.OPEN_ENDED:
            result, rows = scorer.evaluate_rouge(preds, core)
            return Judged([float(r["score"]) for r in rows], float(result["Rouge-L f"]))
        judged, result, _ = scorer.evaluate_multichoice(preds, core)
        return Judged([float(p["result"]) for p in judged], float(result["Accuracy"]))


def run_official(evaluator: Any, sets: list[TaskSet]) -> tuple[float, list[Judged]]:
    """Seconds spent in the evaluator (inputs built beforehand, as if read from disk) and its scores."""
    inputs = [official_inputs(ts) for ts in sets]
    start = time.perf_counter()
    judged = [
        official_task(evaluator, ts, core, preds) for ts, (core, preds) in zip(sets, inputs, strict=True)
    ]
    return time.perf_counter() - start, judged


def run_paper(sets: list[TaskSet]) -> tuple[float, list[Judged]]:
    judge = scorer(DEFAULT_SCORER)
    start = time.perf_counter()
    judged = []
    for ts in sets:
        scores = [judge(ts.task, s, a)[1] for s, a in zip(ts.samples, ts.answers, strict=True)]
        judged.append(Judged(scores, math.fsum(scores) / len(scores)))
    return time.perf_counter() - start, judged


def run_score_stage(sets: list[TaskSet]) -> tuple[float, list[Judged]]:
    """What ``milebench score`` does per task: judgments under every scorer and the task score."""
    preds = [
        {s.sample_id: Prediction(task=ts.task.name, mode=Mode.MULTI_IMAGE, model="bench",
                                 sample_id=s.sample_id, response=a, cache_key="bench", seconds=0.0)
         for s, a in zip(ts.samples, ts.answers, strict=True)}
        for ts in sets
    ]  # fmt: skip
    start = time.perf_counter()
    for ts, task_preds in zip(sets, preds, strict=True):
        score_task(ts.task, "bench", Mode.MULTI_IMAGE, ts.samples, task_preds)
    return time.perf_counter() - start, []


def rounded_rouge(task: TaskSpec) -> bool:
    """Whether the evaluator writes this task's per-sample scores rounded (its ROUGE-L tasks)."""
    dispatched = any(k in task.name for k in ("NeedleInAHaystack", "MMCoQA"))
    return task.question_type is QuestionType.OPEN_ENDED and not dispatched


def disagreements(sets: list[TaskSet], ours: list[Judged], official: list[Judged]) -> tuple[list[str], int]:
    """Samples and task scores where the two differ (task scores to 1e-9), and the samples that agree."""
    found, agreed = [], 0
    for ts, mine, theirs in zip(sets, ours, official, strict=True):
        digits = ROUNDING if rounded_rouge(ts.task) else None
        for s, a, b in zip(ts.samples, mine.samples, theirs.samples, strict=True):
            if (a if digits is None else round(a, digits)) == b:
                agreed += 1
            else:
                found.append(f"{ts.task.name} sample {s.sample_id}: ours {a}, official {b}")
        if not math.isclose(mine.mean, theirs.mean, rel_tol=0, abs_tol=1e-9):
            found.append(f"{ts.task.name}: task score ours {mine.mean}, official {theirs.mean}")
    return found, agreed


def best_of(repeats: int, run: Callable[[], tuple[float, list[Judged]]]) -> tuple[float, list[Judged]]:
    results = [run() for _ in range(repeats)]
    return min(results, key=lambda r: r[0])


def peak_mib(run: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--official", type=Path, required=True, help="Folder holding the official evaluate.py."
    )
    parser.add_argument("--repeats", type=int, default=3, help="Timed repeats; the fastest counts.")
    parser.add_argument("--scale", type=float, default=1.0, help="Fraction of each task's sample count.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    evaluator = load_official(args.official)
    specs = load_specs()
    tasks = [
        t.model_copy(update={"n_samples": max(1, round(t.n_samples * args.scale))})
        for t in specs.tasks.values()
    ]
    with tempfile.TemporaryDirectory() as tmp:
        prepared = prepared_fixture(bench_paths(Path(tmp)), tasks, FIXTURE_SAMPLES, args.seed)
    sets = full_size(prepared, tasks, args.seed)
    n = sum(len(ts.samples) for ts in sets)

    official_s, official = best_of(args.repeats, lambda: run_official(evaluator, sets))
    paper_s, paper = best_of(args.repeats, lambda: run_paper(sets))
    stage_s, _ = best_of(args.repeats, lambda: run_score_stage(sets))
    problems, agreed = disagreements(sets, paper, official)
    memory = {
        "official": peak_mib(lambda: run_official(evaluator, sets)),
        "paper": peak_mib(lambda: run_paper(sets)),
        "stage": peak_mib(lambda: run_score_stage(sets)),
    }
    rows = [
        ("official evaluate.py (baseline)", n / official_s, memory["official"]),
        ("kit paper scorer", n / paper_s, memory["paper"]),
        ("kit score stage (paper + standard, task score)", n / stage_s, memory["stage"]),
    ]
    base = rows[0][1]
    lines = [f"{n} samples, {len(sets)} tasks, best of {args.repeats}",
             f"{'':48} {'samples/s':>12} {'ratio':>8} {'peak MiB':>9}"]  # fmt: skip
    lines += [f"{name:48} {rate:12.0f} {rate / base:8.2f} {mib:9.1f}" for name, rate, mib in rows]
    lines.append(
        f"per-sample agreement with the official evaluator: {agreed}/{n}; task scores within 1e-9: "
        f"{sum(1 for p in problems if ': task score' in p) == 0}"
        + ("" if not problems else "\n  " + "\n  ".join(problems[:20]))
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
