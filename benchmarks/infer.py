"""Inference harness overhead and batching throughput, on the tiny LLaVA on CPU.

The tiny LLaVA is built offline into a scratch folder and fed the mini-MileBench fixture, prepared for
its own regime (context length, tokens per image, tokenizer) exactly as a run prepares it. Each task is
run through the engine (``run_model``: cache keys, batching, adapter, journal appends with fsync,
progress), as an ``infer`` job does, with the job's thread allotment (one thread: inputs built in line),
and again as a job with two threads runs it (one for the model, one input worker building the next
batch while the model generates).

Two baselines are measured in the same run, on the same batches:
- the bare loop: what the official MileBench worker does per batch and nothing else (open the images,
  the model's own processor, ``generate``, decode), with no cache keys, journal or checks.
- the model's ``generate`` alone, timed inside every run. Its ratio shows how much of a sample's time
  goes to the model's input pipeline (image decoding and the checkpoint's processor), which any runner
  pays and which a 32-wide random model makes look large.
Harness overhead (goal: under 1.10) is the engine's time per second of generation over the bare loop's.
The plain wall-time ratio is shown too, but on a shared 2-core box the same ``generate`` varies by up to
10% from run to run, and that noise lands in it whole; per second of generation it cancels.
Throughput is measured with one sample per batch and with the official batching.
Run: ``python benchmarks/infer.py [--samples-per-task N] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from mini_inputs import bench_paths

from milebench.benchmarks.milebench.fixture.prepared import prepared_fixture
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import regime_for
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.infer.engine import plan_batches, run_model
from milebench.infer.hf_image_text_to_text import HfImageTextToTextAdapter
from milebench.infer.registry import load_adapter
from milebench.infer.threads import limit_threads, split_threads
from milebench.infer.tiny import build_tiny_llava
from milebench.job_resources import infer_resources
from milebench.spec.execution import Decoding
from milebench.spec.model import BatchRule, ModelSpec

MODEL = "tiny-llava"
UNBATCHED = BatchRule(batch_image=1)
"""``max(1 // n_images, 1)``: one sample per batch."""
WORKER_THREADS = 2
"""The allotment whose split gives an input worker."""

Tasks = dict[str, list[PreparedSample]]


class Stopwatch:
    """Seconds spent inside the wrapped callables, summed."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


@dataclass(frozen=True)
class Timing:
    wall: float
    generate: float
    """Seconds inside the model's ``generate``."""

    @property
    def over_generate(self) -> float:
        return self.wall / self.generate


def timed(adapter: HfImageTextToTextAdapter, run: Callable[[], None]) -> Timing:
    """Wall time of ``run`` and the model's generate time inside it."""
    stopwatch = Stopwatch()
    model = adapter.model
    model.generate = stopwatch.wrap(model.generate)
    try:
        start = time.perf_counter()
        run()
        wall = time.perf_counter() - start
    finally:
        del model.generate
    return Timing(wall, stopwatch.seconds)


@torch.inference_mode()
def bare_loop(adapter: HfImageTextToTextAdapter, rule: BatchRule, tasks: Tasks) -> None:
    """The official worker's loop over the same batches: images, processor, generate (per sample where
    the execution says so, with its stop strings), decode."""
    tokenizer = adapter.processor.tokenizer
    per_sample = adapter.execution.decoding is Decoding.PER_SAMPLE
    for samples in tasks.values():
        for batch in plan_batches(samples, rule):
            inputs = adapter.encode(batch)
            for row in adapter.split_rows(inputs) if per_sample else [inputs]:
                stop = adapter.stopper(row)
                kwargs = adapter.generation_kwargs(int(row["input_ids"].shape[0]))
                output = adapter.model.generate(
                    **row, **kwargs, **({"stopping_criteria": [stop]} if stop else {})
                )
                tokenizer.batch_decode(output[:, row["input_ids"].shape[1] :], skip_special_tokens=True)


def engine_runs(
    adapter: HfImageTextToTextAdapter, spec: ModelSpec, tasks: Tasks, out: Path, workers: int
) -> None:
    """Every task through the engine, as its infer jobs run, into fresh outputs."""
    for task, samples in tasks.items():
        journal = out / "journal" / f"{task}.jsonl"
        run_model(adapter, spec, samples, out / f"{task}.jsonl", journal, input_workers=workers)


def setup(root: Path, samples_per_task: int, n_tasks: int | None = None) -> tuple[ModelSpec, RunPaths, Tasks]:
    """Build the tiny model and prepare the fixture (its first ``n_tasks`` tasks, default all) for the
    model's regime, inside ``root``."""
    specs = load_specs()
    spec = specs.models[MODEL]
    paths = bench_paths(root)
    run = RunSpec(name="bench", description="benchmark", models=(MODEL,), data=FixtureSource(kind="fixture"))
    build_tiny_llava(spec, paths.model_dir(MODEL))
    regime = regime_for(spec, run, Mode.MULTI_IMAGE, specs.root)
    tasks = list(specs.tasks.values())[:n_tasks]
    return spec, paths, prepared_fixture(paths, tasks, samples_per_task, regime=regime)


def measure(
    adapter: HfImageTextToTextAdapter, spec: ModelSpec, tasks: Tasks, root: Path, repeats: int
) -> dict[str, dict[str, Timing]]:
    """Per batching rule: the bare loop and the engine in line and with an input worker, fastest of
    ``repeats`` each, interleaved so a slow spell of the machine hits all of them alike."""
    workers = split_threads(WORKER_THREADS)[1]
    results: dict[str, dict[str, Timing]] = {}
    for name, rule in {"one sample per batch": UNBATCHED, "official batching": spec.batch}.items():
        batched = spec.model_copy(update={"batch": rule})
        runs: dict[str, Callable[..., None]] = {
            "bare loop": lambda i, rule=rule: bare_loop(adapter, rule, tasks),
            "engine, in line": lambda i, s=batched, n=name: engine_runs(
                adapter, s, tasks, root / f"{n}-{i}", 0
            ),
            "engine, input worker": lambda i, s=batched, n=name: engine_runs(
                adapter, s, tasks, root / f"{n}-w{i}", workers
            ),
        }
        best: dict[str, Timing] = {}
        for i in range(repeats):
            for label, run in runs.items():
                timing = timed(adapter, functools.partial(run, i))
                if label not in best or timing.wall < best[label].wall:
                    best[label] = timing
        results[name] = best
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--samples-per-task",
        type=int,
        default=12,
        help="Fixture samples of each of 29 tasks (an input worker starts only for 8 or more batches).",
    )
    parser.add_argument("--repeats", type=int, default=2, help="Timed runs per setting; the fastest counts.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spec, paths, tasks = setup(root, args.samples_per_task)
        threads = infer_resources(spec).threads
        limit_threads(split_threads(threads)[0])
        adapter = load_adapter(spec, paths, paths.data_root)
        assert isinstance(adapter, HfImageTextToTextAdapter)
        adapter.generate(next(iter(tasks.values()))[:1])
        results = measure(adapter, spec, tasks, root / "runs", args.repeats)
    samples = sum(len(s) for s in tasks.values())
    lines = [
        f"{samples} samples ({args.samples_per_task} per task, 29 tasks), tiny LLaVA on CPU, max_new_tokens "
        f"{spec.generation.max_new_tokens}, model on 1 thread ({threads} thread(s) as its infer jobs get; "
        f"the input worker is a job with {WORKER_THREADS}), fastest of {args.repeats}; load average "
        f"{load:.2f} on {os.cpu_count()} cores at the start",
        f"{'':44} {'samples/s':>10} {'harness':>8} {'over bare':>10} {'over generate':>14}",
    ]
    for name, timings in results.items():
        bare = timings["bare loop"]
        for label, t in timings.items():
            harness = t.over_generate / bare.over_generate
            lines.append(
                f"{name + ', ' + label:44} {samples / t.wall:10.2f} {harness:8.3f} "
                f"{t.wall / bare.wall:10.3f} {t.over_generate:14.3f}"
            )
    lines.append(
        "harness: time per second of generation over the bare loop's, the harness overhead (goal < 1.10). "
        "over bare: plain wall time over the bare loop's (carries the run-to-run noise of generate). over "
        "generate: wall time over the model's generate time inside the same run (the rest is the model's "
        "input pipeline, plus the harness)."
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
