"""Inference harness overhead and batching throughput, on the tiny LLaVA on CPU.

The tiny LLaVA is built offline into a scratch folder and fed the mini-MileBench fixture, prepared for
its own regime (context length, tokens per image, tokenizer) exactly as a run prepares it. Each task is
run through the engine (``run_model``: cache keys, batching, adapter, journal appends with fsync,
progress), as an ``infer`` job does, with the job's thread allotment. The model's own ``generate`` is
wrapped with a timer during the same runs, so the baseline is the generate time for exactly the same
inputs. Harness overhead is the end-to-end wall time per sample divided by that generate time (goal:
under 1.10). Two parts of the overhead are shown apart: the adapter's input building (prompt, image
loading, processor) and the engine's own time outside the adapter (cache keys, batching, journal
appends, progress). Throughput is measured with one sample per batch and with the official batching;
ratios are against the unbatched generate rate of the same run.
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

from mini_inputs import bench_paths

from milebench.fixture.prepared import prepared_fixture
from milebench.infer.adapter import Adapter
from milebench.infer.commands import limit_threads
from milebench.infer.engine import run_model
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny_llava
from milebench.job_resources import infer_resources
from milebench.paths import RunPaths
from milebench.preprocess.regime import regime_for
from milebench.records import PreparedSample
from milebench.spec.model import BatchRule, ModelSpec
from milebench.spec.registry import load_specs
from milebench.spec.run import FixtureSource, Mode, RunSpec

MODEL = "tiny-llava"
UNBATCHED = BatchRule(batch_image=1)
"""``max(1 // n_images, 1)``: one sample per batch."""


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
    samples: int
    wall: float
    generate: float
    encode: float
    adapter: float
    """Seconds inside the adapter's ``generate``: input building, the model's generate, decoding."""

    @property
    def overhead(self) -> float:
        """End-to-end time per sample over the model's generate time per sample."""
        return self.wall / self.generate

    @property
    def engine(self) -> float:
        """The engine's own time (everything outside the adapter) over the model's generate time."""
        return (self.wall - self.adapter) / self.generate


def timed_run(adapter: Adapter, spec: ModelSpec, tasks: dict[str, list[PreparedSample]], out: Path) -> Timing:
    """Every task through the engine with fresh outputs; generate, encode and the adapter timed inside."""
    generate, encode, whole = Stopwatch(), Stopwatch(), Stopwatch()
    model, inner_generate, inner_encode = adapter.model, adapter.model.generate, adapter.encode  # type: ignore[attr-defined]
    model.generate = generate.wrap(inner_generate)
    adapter.encode = encode.wrap(inner_encode)  # type: ignore[method-assign]
    adapter.generate = whole.wrap(adapter.generate)  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        for task, samples in tasks.items():
            run_model(adapter, spec, samples, out / f"{task}.jsonl", out / "journal" / f"{task}.jsonl")
        wall = time.perf_counter() - start
    finally:
        del model.generate
        del adapter.encode
        del adapter.generate
    samples = sum(len(s) for s in tasks.values())
    return Timing(samples, wall, generate.seconds, encode.seconds, whole.seconds)


def fastest(repeats: int, run: Callable[[int], Timing]) -> Timing:
    return min((run(i) for i in range(repeats)), key=lambda t: t.wall)


def setup(root: Path, samples_per_task: int) -> tuple[ModelSpec, RunPaths, dict[str, list[PreparedSample]]]:
    """Build the tiny model and prepare the fixture for its regime, inside ``root``."""
    specs = load_specs()
    spec = specs.models[MODEL]
    paths = bench_paths(root)
    run = RunSpec(name="bench", description="benchmark", models=(MODEL,), data=FixtureSource(kind="fixture"))
    build_tiny_llava(spec, paths.model_dir(MODEL))
    regime = regime_for(spec, run, Mode.MULTI_IMAGE, specs.root)
    tasks = list(specs.tasks.values())
    return spec, paths, prepared_fixture(paths, tasks, samples_per_task, regime=regime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--samples-per-task", type=int, default=4, help="Fixture samples of each of 29 tasks."
    )
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs per setting; the fastest counts.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spec, paths, tasks = setup(root, args.samples_per_task)
        threads = infer_resources(spec).threads
        limit_threads(threads)
        adapter = load_adapter(spec, paths, paths.data_root)
        warm = next(iter(tasks.values()))[:1]
        adapter.generate(warm)
        settings = {"one sample per batch": UNBATCHED, "official batching": spec.batch}
        timings = {
            name: fastest(
                args.repeats,
                lambda i, name=name, rule=rule: timed_run(
                    adapter, spec.model_copy(update={"batch": rule}), tasks, root / "runs" / f"{name}-{i}"
                ),
            )
            for name, rule in settings.items()
        }
    base = next(iter(timings.values()))
    base_rate = base.samples / base.generate
    lines = [
        f"{base.samples} samples ({args.samples_per_task} per task, 29 tasks), tiny LLaVA on CPU, "
        f"max_new_tokens {spec.generation.max_new_tokens}, {threads} thread(s) as its infer jobs get, "
        f"fastest of {args.repeats}; load average "
        f"{load:.2f} on {os.cpu_count()} cores at the start (other load slows generate far more than input "
        "building and makes the overhead look smaller)",
        f"{'':44} {'samples/s':>10} {'ratio':>7} {'overhead':>9} {'encode':>7} {'engine':>7}",
    ]
    for name, t in timings.items():
        generate_rate, wall_rate = t.samples / t.generate, t.samples / t.wall
        lines.append(f"{'model generate, ' + name:44} {generate_rate:10.2f} {generate_rate / base_rate:7.2f}")
        lines.append(
            f"{'engine end-to-end, ' + name:44} {wall_rate:10.2f} {wall_rate / base_rate:7.2f} "
            f"{t.overhead:9.3f} {t.encode / t.generate:7.3f} {t.engine:7.3f}"
        )
    lines.append(
        "baseline: model generate, one sample per batch. overhead: end-to-end wall time over generate time "
        "(goal < 1.10); encode: the adapter's input building over generate time; engine: the engine's time "
        "outside the adapter over generate time (both parts of the overhead)."
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
