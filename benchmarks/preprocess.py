"""Preprocess throughput: combined-image tiling (serial vs parallel, cold vs cached) and truncation.

Each figure is printed with its ratio to the baseline of its group, measured in the same run on the same
synthetic inputs: tiling against serial tiling with a cold cache, truncation against the unbudgeted
pairing walk. Run: ``python benchmarks/preprocess.py [--samples N] [--workers N]``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mini_inputs import FILLER_WORDS
from PIL import Image, ImageDraw

from milebench.benchmarks.milebench.preprocess import combine
from milebench.benchmarks.milebench.preprocess.truncate import Budget, fit_context
from milebench.benchmarks.milebench.spec.run import TruncationMode
from milebench.infer.records import IMAGE_PLACEHOLDER
from milebench.infer.tiny import build_tokenizer
from milebench.io import sha256_file
from milebench.preprocess.tokenizer import HFTokenizer

IMAGES_PER_SAMPLE = 4


def synthetic_image(rng: random.Random, path: Path) -> None:
    """A 640x480 picture with random boxes, so resizing and JPEG coding do real work."""
    image = Image.new("RGB", (640, 480), tuple(rng.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    for _ in range(30):
        x, y = rng.randrange(600), rng.randrange(440)
        draw.rectangle(
            (x, y, x + rng.randrange(8, 200), y + rng.randrange(8, 200)), fill=rng.randrange(1 << 24)
        )
    image.save(path, quality=90)


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def tiling(folder: Path, n_samples: int, workers: int) -> list[tuple[str, float]]:
    rng = random.Random(0)
    jobs = []
    for s in range(n_samples):
        paths = [folder / f"{s}_{k}.jpg" for k in range(IMAGES_PER_SAMPLE)]
        for path in paths:
            synthetic_image(rng, path)
        jobs += combine.sample_jobs(paths, [sha256_file(p) for p in paths], 1)
    n_images = n_samples * IMAGES_PER_SAMPLE
    serial = timed(lambda: combine.make_pictures(jobs, folder / "serial", 1))
    parallel = timed(lambda: combine.make_pictures(jobs, folder / "parallel", workers))
    cached = timed(lambda: combine.make_pictures(jobs, folder / "serial", 1))
    return [
        ("tiling, serial, cold cache (baseline)", n_images / serial),
        (f"tiling, {workers} threads, cold cache", n_images / parallel),
        ("tiling, serial, cached", n_images / cached),
    ]


def truncation(n_prompts: int) -> list[tuple[str, float]]:
    rng = random.Random(1)
    tokenizer = HFTokenizer(build_tokenizer(), "tiny-llava")
    prompts = []
    for _ in range(n_prompts):
        n_images = rng.randint(2, 40)
        pieces = [" ".join(rng.choices(FILLER_WORDS, k=rng.randint(5, 30))) for _ in range(n_images + 1)]
        prompts.append((IMAGE_PLACEHOLDER.join(pieces), [f"{k}.jpg" for k in range(n_images)]))
    instruction = "Answer the question based on the images."

    def run(budget: Budget | None) -> float:
        return n_prompts / timed(lambda: [fit_context(instruction, c, i, budget, True) for c, i in prompts])

    rows = [("truncation, no budget (baseline)", run(None))]
    for mode in TruncationMode:
        rows.append((f"truncation, {mode}, 2048 tokens", run(Budget(2048, 16, tokenizer, mode))))
    return rows


def table(unit: str, rows: list[tuple[str, float]]) -> str:
    base = rows[0][1]
    lines = [f"{'':44} {unit:>12} {'ratio':>8}"]
    lines += [f"{name:44} {rate:12.1f} {rate / base:8.2f}" for name, rate in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=24, help="Samples to tile (4 images each).")
    parser.add_argument("--prompts", type=int, default=500, help="Prompts to truncate.")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tiles = tiling(Path(tmp), args.samples, args.workers)
    sys.stdout.write(table("images/s", tiles) + "\n\n" + table("prompts/s", truncation(args.prompts)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
