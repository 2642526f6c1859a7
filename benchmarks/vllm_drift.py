"""The vLLM backend against the transformers backend on the tiny LLaVA, on the CPU: drift audit.

The whole path a user takes, through Snakemake: three run specs in a copy of the specs folder select
three executions of the same model over the same fixture samples. ``drift-vllm`` selects the ``vllm``
variant and runs under ``--config deployment=docker``, so its inference runs in the ``vllm`` family
image (``containers/vllm``, built here on the local base); ``drift-paper`` (the paper's choices) and
``drift-transformers`` (the vllm variant's choices on transformers) run on the host and each declares a
drift audit against
``drift-vllm``: what switching to the variant changes, and what the engine alone changes. Their reports
carry the audit tables, which are printed with each step's wall time. Needs a Docker engine.

Run: ``python benchmarks/vllm_drift.py --out DIR [--tasks N] [--samples-per-task N]
[--image-base REF] [--ca-bundle PEM]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the Docker tests' specs helpers, shared rather than written twice

from docker_runs import SAME_CHOICES, add_same_choices  # type: ignore[import-not-found]  # noqa: E402

from milebench.benchmarks.milebench.spec.registry import load_specs  # noqa: E402
from milebench.benchmarks.milebench.spec.run import Mode  # noqa: E402
from milebench.benchmarks.milebench.spec.task import ScorerKind  # noqa: E402
from milebench.containers.image import EngineUnavailable, client_from_env  # noqa: E402
from milebench.spec.folder import DEFAULT_SPECS  # noqa: E402

log = logging.getLogger("vllm_drift")

MODEL = "tiny-llava"
VLLM_RUN = "drift-vllm"
HOST_RUNS = {"drift-paper": "paper", "drift-transformers": SAME_CHOICES}
"""Run name -> the execution variant it selects for the model (on the host, audited against vLLM)."""
SNAKEFILE = REPO / "Snakefile"


def write_specs(out: Path, tasks: list[str], samples_per_task: int) -> Path:
    """A copy of the specs folder with the three runs."""
    specs = out / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    add_same_choices(specs, MODEL)
    common = {
        "models": [MODEL],
        "tasks": tasks,
        "modes": [Mode.MULTI_IMAGE.value],
        "data": {"kind": "fixture", "seed": 0, "samples_per_task": samples_per_task},
    }
    runs: dict[str, dict[str, object]] = {
        VLLM_RUN: {"execution": {MODEL: "vllm"}},
        **{
            name: {
                "execution": {MODEL: variant},
                "audit": {"drift": [{"model_a": MODEL, "run_b": VLLM_RUN, "resamples": 2000}]},
            }
            for name, variant in HOST_RUNS.items()
        },
    }
    for name, extra in runs.items():
        run = {"name": name, "description": f"The tiny LLaVA for the vLLM drift audit ({name}).", **common}
        (specs / "runs" / f"{name}.yaml").write_text(yaml.safe_dump({**run, **extra}, sort_keys=False))
    return specs


def snakemake(out: Path, specs: Path, run: str, target: str, build: list[str]) -> float:
    """One Snakemake invocation in ``out``; its wall time."""
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    env.setdefault("MILEBENCH_VLLM_MEMORY_FRACTION", "0.1")
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(SNAKEFILE), "--cores", "2", target]
    start = time.perf_counter()
    subprocess.run(
        [*command, "--config", f"run={run}", f"specs={specs}", *build], cwd=out, env=env, check=True
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="Scratch folder (created).")
    parser.add_argument("--tasks", type=int, default=2, help="Multi-choice tasks of the fixture.")
    parser.add_argument("--samples-per-task", type=int, default=5)
    parser.add_argument("--image-base", default=None, help="Base image of the vllm image (no registry).")
    parser.add_argument("--ca-bundle", type=Path, default=None, help="Extra CA certificates for its build.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        client_from_env()
    except EngineUnavailable as err:
        log.error("%s", err)
        return 1
    choice = sorted(t.name for t in load_specs().tasks.values() if t.scorer is ScorerKind.CHOICE)
    tasks = choice[: args.tasks]
    args.out.mkdir(parents=True)
    specs = write_specs(args.out, tasks, args.samples_per_task)
    build = [f"image_base={args.image_base}"] if args.image_base else []
    build += [f"image_ca_bundle={args.ca_bundle.resolve()}"] if args.ca_bundle else []
    times = {VLLM_RUN: snakemake(args.out, specs, VLLM_RUN, "main_table", [*build, "deployment=docker"])}
    times |= {name: snakemake(args.out, specs, name, "all", []) for name in HOST_RUNS}
    for name, seconds in times.items():
        log.info("%s: %.1f s (Snakemake, images included)", name, seconds)
    for name in HOST_RUNS:
        for table in sorted((args.out / "reports" / name / "audit").glob("drift-*.md")):
            sys.stdout.write(table.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
