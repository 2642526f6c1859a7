"""The kit's infer path against a bare transformers loop and lmms-eval's own model class, on the tiny LLaVA.

The tiny LLaVA is built offline into a scratch folder and the first tasks of the mini-MileBench fixture
are prepared for its regime, as a run prepares them. The same samples then go through three paths, one
after the other, each with its own copy of the checkpoint, on the CPU with the thread allotment of an
infer job:
- kit: the hf-llava adapter through the engine (``run_model``), as ``milebench infer`` runs a cell:
  cache keys, the execution's choices (per-chunk tokenization, padded-square pictures, stop strings),
  journal appends with fsync;
- bare loop (the baseline): ``LlavaForConditionalGeneration`` and ``AutoProcessor``, one ``generate`` per
  sample on the kit's rendered prompt and its preprocessed pictures, with the kit's ``generate`` settings,
  decoded and stripped; no stop criterion, no checks;
- lmms-eval: its ``LlavaHf`` class, loaded from the same folder, answering the same rendered prompts and
  pictures through ``generate_until`` (a pass-through chat template, the kit's ``max_new_tokens``, greedy),
  as its evaluator calls it. lmms-eval is not a kit dependency: install it beside the kit without its
  dependencies (docs/tests.md); where it cannot be imported or driven, the line says why and the other
  two paths still run.
Timed: the loop over the samples (pictures read inside it), not the model loads. Answers are compared
with the bare loop's, sample by sample.
Run: ``python benchmarks/peers.py [--tasks N] [--samples-per-task N]``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from infer import setup
from transformers import AutoProcessor, LlavaForConditionalGeneration

from milebench.benchmarks.milebench.records import PreparedSample
from milebench.infer.engine import run_model
from milebench.infer.hf_llava import HfLlavaAdapter
from milebench.infer.journal import read_predictions
from milebench.infer.registry import load_adapter
from milebench.infer.threads import limit_threads, split_threads
from milebench.job_resources import infer_resources
from milebench.spec.model import ModelSpec

BASELINE = "bare loop"
LMMS_MODULES = ("lmms_eval.models.simple.llava_hf", "lmms_eval.models.llava_hf")
"""Where lmms-eval releases keep ``LlavaHf`` (0.4 and later, then earlier)."""
PASS_THROUGH_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
"""lmms-eval wraps every context in a chat template; this one leaves the kit's rendered prompt as it is."""
LMMS_TASK, LMMS_SPLIT = "mini-milebench", "test"

Tasks = dict[str, list[PreparedSample]]


@dataclass(frozen=True)
class PathRun:
    seconds: float
    """Wall time of the loop over every sample."""
    answers: list[str]
    """One per sample, in prepared order."""


def timed(run: Callable[[], list[str]]) -> PathRun:
    start = time.perf_counter()
    answers = run()
    return PathRun(time.perf_counter() - start, answers)


def samples_of(tasks: Tasks) -> list[PreparedSample]:
    return [s for samples in tasks.values() for s in samples]


def kit_path(adapter: HfLlavaAdapter, spec: ModelSpec, tasks: Tasks, out: Path) -> list[str]:
    """Every task through the engine as an infer job runs it; the answers read back from its outputs."""
    answers: list[str] = []
    for task, samples in tasks.items():
        predictions = out / f"{task}.jsonl"
        run_model(
            adapter,
            spec,
            samples,
            predictions,
            out / "journal" / f"{task}.jsonl",
            data_root=adapter.data_root,
        )
        answers += [
            p.response if p.response is not None else f"<failure: {p.failure}>"
            for p in read_predictions(predictions)
        ]
    return answers


@torch.inference_mode()
def bare_path(
    model: Any, processor: Any, adapter: HfLlavaAdapter, samples: Sequence[PreparedSample]
) -> list[str]:
    """One ``generate`` per sample on the kit's prompt and pictures, as a transformers user writes it."""
    kwargs = adapter.generation_kwargs(1)
    answers = []
    for sample in samples:
        images = adapter.input_images(sample)[0]
        inputs = processor(text=[adapter.render(sample)], images=images or None, return_tensors="pt")
        output = model.generate(**inputs, **kwargs)
        new = output[:, inputs["input_ids"].shape[1] :]
        answers.append(processor.tokenizer.batch_decode(new, skip_special_tokens=True)[0].strip())
    return answers


def lmms_model(model_dir: Path) -> tuple[Any, Any]:
    """lmms-eval's ``LlavaHf`` loaded from ``model_dir`` on the CPU, and its ``Instance`` class; raises
    ``ImportError`` naming what is missing."""
    errors = []
    for name in LMMS_MODULES:
        try:
            module = importlib.import_module(name)
            break
        except ImportError as err:
            errors.append(f"{name}: {type(err).__name__}: {err}")
    else:
        raise ImportError("; ".join(errors))
    instance = importlib.import_module("lmms_eval.api.instance").Instance
    model = module.LlavaHf(
        pretrained=str(model_dir),
        device="cpu",
        device_map="cpu",
        dtype="float32",
        chat_template=PASS_THROUGH_TEMPLATE,
    )
    return model, instance


def lmms_path(
    lm: Any, instance: Any, adapter: HfLlavaAdapter, samples: Sequence[PreparedSample]
) -> list[str]:
    """The samples as lmms-eval's evaluator hands them to ``generate_until``: one request per document,
    the pictures fetched from the document by ``doc_to_visual``."""
    lm.task_dict = {LMMS_TASK: {LMMS_SPLIT: dict(enumerate(samples))}}
    gen_kwargs = {"max_new_tokens": adapter.spec.generation.max_new_tokens, "temperature": 0}

    def doc_to_visual(sample: PreparedSample) -> list[Any]:
        return adapter.input_images(sample)[0]

    requests = [
        instance(
            request_type="generate_until",
            arguments=(adapter.render(s), dict(gen_kwargs), doc_to_visual, i, LMMS_TASK, LMMS_SPLIT),
            idx=0,
            metadata={"task": LMMS_TASK, "doc_id": i, "repeats": 1},
        )
        for i, s in enumerate(samples)
    ]
    return [str(text).strip() for text in lm.generate_until(requests)]


def comparison(
    runs: Mapping[str, PathRun | str], labels: Sequence[str], baseline: str = BASELINE
) -> list[str]:
    """The table: seconds per sample of each path and its ratio to ``baseline``'s, answers identical to
    the baseline's, then the differing ones; a path given as a string did not run and the string says why."""
    base = runs[baseline]
    assert isinstance(base, PathRun)
    n = len(labels)
    lines = [f"{'path':12} {'s/sample':>9} {'over bare':>10} {'same answers':>13}"]
    differing: list[str] = []
    for name, run in runs.items():
        if isinstance(run, str):
            lines.append(f"{name:12} not run: {run}")
            continue
        same = [a == b for a, b in zip(run.answers, base.answers, strict=True)]
        lines.append(
            f"{name:12} {run.seconds / n:9.3f} {run.seconds / base.seconds:10.3f} {sum(same):>6} of {n}"
        )
        differing += [
            f"  {name}, {label}: {answer!r} (bare loop {bare!r})"
            for label, answer, bare, ok in zip(labels, run.answers, base.answers, same, strict=True)
            if not ok
        ]
    return lines + (["differing answers:", *differing] if differing else [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4, help="The fixture's first N tasks (default 4).")
    parser.add_argument(
        "--samples-per-task", type=int, default=5, help="Fixture samples per task (default 5)."
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spec, paths, tasks = setup(root, args.samples_per_task, args.tasks)
        threads = split_threads(infer_resources(spec).threads)[0]
        limit_threads(threads)
        adapter = load_adapter(spec, paths, paths.data_root)
        assert isinstance(adapter, HfLlavaAdapter)
        samples = samples_of(tasks)
        model_dir = paths.model_dir(spec.name)
        model = LlavaForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
        processor = AutoProcessor.from_pretrained(model_dir)
        adapter.generate(samples[:1])  # first-call costs (allocator, kernels) paid before any timing
        runs: dict[str, PathRun | str] = {
            "kit": timed(lambda: kit_path(adapter, spec, tasks, root / "predictions")),
            BASELINE: timed(lambda: bare_path(model, processor, adapter, samples)),
        }
        try:
            lm, instance = lmms_model(model_dir)
        except Exception as err:  # any failure to load lmms-eval is reported, not fatal
            runs["lmms-eval"] = f"lmms-eval's LlavaHf cannot be used here: {type(err).__name__}: {err}"
        else:
            runs["lmms-eval"] = timed(lambda: lmms_path(lm, instance, adapter, samples))
    lmms_version = importlib.util.find_spec("lmms_eval") and importlib.metadata.version("lmms_eval")
    header = (
        f"{len(samples)} samples ({args.samples_per_task} per task, {len(tasks)} tasks), tiny LLaVA on CPU, "
        f"max_new_tokens {spec.generation.max_new_tokens}, {threads} thread(s), lmms-eval "
        f"{lmms_version or 'not installed'}; load average {load:.2f} on {os.cpu_count()} cores at the start"
    )
    labels = [f"{s.task}/{s.sample_id}" for s in samples]
    sys.stdout.write("\n".join([header, *comparison(runs, labels)]) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
