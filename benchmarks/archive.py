"""Size of an artifact bundle and the time to archive and verify it, for the reduced smoke run.

The run is the one the Docker acceptance test archives (``tests/docker_runs.py``): Random and tiny LLaVA on
one fixture task, two samples, every job in a container (``--config docker_jobs=all``): the stages in the kit
image, the tiny model in hf-current built with the host's CPU torch (the CUDA build is gigabytes more).
In a scratch folder: both images built on the local base (``.ci/docker-setup.sh``), the run by Snakemake,
``milebench archive --with-data --with-weights --tarball``, the run's results and both images deleted from
the engine, then a full ``milebench verify`` of the tarball (unpacked, every hash, images loaded from it,
re-scored, report re-rendered, every cell re-run, no network). Times are shown against the run's own
Snakemake time (its images already built). Needs a Docker engine.
Run: ``python benchmarks/archive.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the acceptance test's run, shared rather than written twice

from docker_runs import (  # type: ignore[import-not-found]  # noqa: E402  (the tests are not type-checked)
    BOXED_RUN,
    BoxedRun,
    cpu_checkout_at,
    run_boxed,
    torch_wheel,
)

from milebench import cli  # noqa: E402
from milebench.archive.reader import read_manifest  # noqa: E402
from milebench.containers.image import EngineUnavailable, client_from_env  # noqa: E402

MIB = 2**20


def timed(step: str, call: Callable[[], object]) -> float:
    """Seconds ``call`` took; what it prints (the evaluator's summary) is not shown."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = call()
    if code not in (0, None):
        raise SystemExit(f"{step} failed (exit {code})")
    return time.perf_counter() - start


def archive(run: BoxedRun, bundle: Path) -> int:
    """``milebench archive`` with the checkout's package, whose git commit the run's jobs recorded."""
    argv = [sys.executable, "-m", "milebench", "--specs", str(run.root / "specs"), "archive"]
    argv += ["--run", BOXED_RUN, "--root", str(run.root), "--out", str(bundle)]
    argv += ["--with-data", "--with-weights", "--tarball"]
    done = subprocess.run(argv, cwd=run.root, env=run.env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-3000:])
    return done.returncode


def row(name: str, seconds: float, run_s: float) -> str:
    return f"{name:32} {seconds:8.1f} {seconds / run_s:7.2f}"


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    try:
        client = client_from_env()
    except EngineUnavailable as err:
        raise SystemExit(f"needs a Docker engine: {err}") from None
    with tempfile.TemporaryDirectory(prefix="milebench-archive-bench-") as tmp:
        scratch = Path(tmp)
        (scratch / "wheels").mkdir()
        wheel = torch_wheel(scratch / "wheels")
        if wheel is None:
            raise SystemExit("no wheel of the host's torch from pip (its cache, find-links or index)")
        checkout, records = cpu_checkout_at(scratch / "checkout", wheel)
        (scratch / "run").mkdir()
        start = time.perf_counter()
        run = run_boxed(checkout, records, scratch / "run")
        run_s = time.perf_counter() - start
        bundle = scratch / "bundle"
        archive_s = timed("archive", lambda: archive(run, bundle))
        manifest = read_manifest(bundle)
        tarball = bundle.with_name("bundle.tar")
        families = ", ".join(f"{i.family} {i.image_id[7:19]}" for i in manifest.images)
        images_mib = folder_bytes(bundle / "images") / MIB
        lines = [
            "run: reduced smoke (Random + tiny LLaVA, 1 task x 2 samples, every job in a container)",
            f"bundle: {folder_bytes(bundle) / MIB:.1f} MiB in {len(manifest.files) + 1} files (images "
            f"{images_mib:.1f} MiB: {families}); tarball {tarball.stat().st_size / MIB:.1f} MiB",
            f"{'':32} {'seconds':>8} {'ratio':>7}",
            row("the run (Snakemake, baseline)", run_s, run_s),
            row("milebench archive", archive_s, run_s),
        ]
        sys.stdout.write("\n".join(lines) + "\n")  # shown even when verify then fails
        for folder in ("results", "reports"):
            shutil.rmtree(run.root / folder)
        for image in manifest.images:  # with their build's own layers: vfs copies each one whole
            client.images.remove(image.image_id, force=True)
        verify_s = timed("verify", lambda: cli.main(["verify", str(tarball)]))
        sys.stdout.write(row("milebench verify (tarball)", verify_s, run_s) + "\n")
        sys.stdout.write("verify: every check passed, no network\n")
        for image in manifest.images:  # loaded from the bundle: not kept
            client.images.remove(image.image_id, force=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
