"""Size of an artifact bundle and the time to archive and verify it.

In a scratch folder: a small run (Random on ``--tasks`` fixture tasks, by Snakemake; ``--smoke`` takes the
smoke run instead, whose tiny models need the hf-current image), the kit image built on ``--base``, then
``milebench archive --with-data --with-weights --tarball`` and a full ``milebench verify`` (images loaded,
re-scored, report re-rendered, one cell per model re-run, no network). Without a Docker engine the bundle
leaves the images out and verify checks the hashes only; the output says which. Times are shown against
the run's own Snakemake time in the same session.
Run: ``python benchmarks/archive.py [--tasks N | --smoke] [--base IMAGE] [--ca-bundle PEM]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from milebench import cli
from milebench.containers.image import RECORDS_DIR, EngineUnavailable, build_image, client_from_env
from milebench.spec.registry import DEFAULT_SPECS, load_specs

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


def write_run(root: Path, n_tasks: int, smoke: bool) -> str:
    """A copy of the specs with the run to archive; returns its name."""
    specs = root / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    if smoke:
        return "smoke"
    tasks = list(load_specs(specs).tasks)[:n_tasks]
    run = {
        "name": "bench",
        "description": "archive benchmark",
        "models": ["random"],
        "tasks": tasks,
        "data": {"kind": "fixture", "seed": 0, "samples_per_task": 3},
    }
    (specs / "runs" / "bench.yaml").write_text(yaml.safe_dump(run))
    return "bench"


def timed(step: str, call: Callable[..., int | None], *args: object) -> float:
    """Seconds ``call`` took; what it prints (the bundle id, the evaluator's summary) is not shown."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = call(*args)
    if code not in (0, None):
        raise SystemExit(f"{step} failed (exit {code})")
    return time.perf_counter() - start


def snakemake(root: Path, run: str) -> int:
    config = ["--config", f"run={run}", f"specs={root / 'specs'}"]
    return subprocess.run([*SNAKEMAKE, "--cores", "all", *config], cwd=root, capture_output=True).returncode


def engine_images(root: Path, base: str, ca: Path | None, families: list[str]) -> bool:
    """Build the run's family images, recorded under the scratch folder; False without an engine."""
    try:
        client = client_from_env()
    except EngineUnavailable:
        return False
    for family in families:
        build_image(family, base=base, ca_bundle=ca, records=root / RECORDS_DIR, client=client)
    return True


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4, help="Fixture tasks of the small run.")
    parser.add_argument("--smoke", action="store_true", help="Archive the smoke run instead.")
    parser.add_argument("--base", default="milebench-base:bookworm", help="Base image of the family images.")
    parser.add_argument("--ca-bundle", type=Path, default=None, help="Extra CA certificates for the build.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="milebench-archive-bench-") as tmp:
        root = Path(tmp)
        run = write_run(root, args.tasks, args.smoke)
        os.chdir(root)
        run_s = timed("the run", snakemake, root, run)
        specs = load_specs(root / "specs")
        families = sorted({"kit"} | {m.container for m in specs.run_models(specs.run(run)) if m.container})
        docker = engine_images(root, args.base, args.ca_bundle, families)
        bundle = root / "bundle"
        archive = ["--specs", str(root / "specs"), "archive", "--run", run, "--out", str(bundle)]
        archive += ["--with-data", "--with-weights", "--tarball", *([] if docker else ["--no-images"])]
        archive_s = timed("archive", cli.main, archive)
        verify = ["verify", str(bundle), *([] if docker else ["--only", "hashes"])]
        verify_s = timed("verify", cli.main, verify)
        images = folder_bytes(bundle / "images") if (bundle / "images").is_dir() else 0
        total, tarball = folder_bytes(bundle), bundle.with_name("bundle.tar").stat().st_size
    what = "the smoke run" if args.smoke else f"a small run (Random, {args.tasks} fixture tasks)"
    checks = "every check, no network" if docker else "hashes only: no Docker engine, images left out"
    mib = 2**20
    rows = [
        ("the run (Snakemake, baseline)", run_s),
        ("milebench archive", archive_s),
        ("milebench verify", verify_s),
    ]
    lines = [
        f"run: {what}; verify: {checks}",
        f"bundle: {total / mib:.1f} MiB (images {images / mib:.1f} MiB); tarball {tarball / mib:.1f} MiB",
        f"{'':32} {'seconds':>8} {'ratio':>7}",
    ]
    lines += [f"{name:32} {sec:8.1f} {sec / run_s:7.2f}" for name, sec in rows]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
