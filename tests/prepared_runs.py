"""A run fetched and prepared by the kit's own commands, and the command line of its infer job: what the
tests of one infer job per (model, mode) start from (tests/test_infer_load_once.py for a model that loads
weights, tests/test_infer_api_jobs.py for a served one)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from milebench import cli
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.model import TinyWeights


def mb(*argv: str) -> None:
    assert cli.main(list(argv)) == 0, argv


def prepare_run(root: Path, run: dict[str, Any], model: str, models: Sequence[dict[str, Any]] = ()) -> Path:
    """``run`` (a run spec's fields, fixture data) in a copy of the shipped specs under ``root``, with
    ``models`` (model specs' fields) added: its data fetched, ``model`` built if tiny, and every task
    prepared in each mode for the input regime ``model`` reads."""
    specs = root / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    for spec in models:
        (specs / "models" / f"{spec['name']}.yaml").write_text(yaml.safe_dump(spec))
    (specs / "runs" / f"{run['name']}.yaml").write_text(yaml.safe_dump(run))
    loaded = load_specs(specs)
    spec = loaded.run(run["name"])
    paths = RunPaths.for_run(spec, base=root)
    top = ["--specs", str(specs)]
    job = ["--run", spec.name, "--root", str(root)]
    data = run["data"]
    mb(*top, "fixture", "--out", str(paths.mirror), "--seed", str(data["seed"]),
       "--samples-per-task", str(data["samples_per_task"]))  # fmt: skip
    mb(*top, "fetch", *job)
    if isinstance(loaded.model(model).weights, TinyWeights):
        mb(*top, "tiny-model", *job, "--model", model)
    for mode in spec.modes:
        regime = model_regime(loaded, spec, model, Mode(mode)).id
        for task in run["tasks"]:
            mb(*top, "preprocess", *job, "--task", task, "--mode", mode, "--regime", regime)
    return root


def infer_argv(root: Path, run: str, model: str, tasks: Sequence[str], mode: str) -> list[str]:
    """``milebench infer`` of ``model`` over ``tasks`` in ``mode``: one job, as the DAG runs it."""
    cells = [arg for task in tasks for arg in ("--task", task)]
    job = ["--run", run, "--root", str(root), "--model", model, *cells, "--mode", mode, "--threads", "1"]
    return ["--specs", str(root / "specs"), "infer", *job]


def run_paths(root: Path, run: str) -> RunPaths:
    return RunPaths.for_run(load_specs(root / "specs").run(run), base=root)


def journal_lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def fixture_run(
    name: str, models: Sequence[str], tasks: Sequence[str], mode: str, samples: int
) -> dict[str, Any]:
    """A run spec's fields: ``models`` on ``tasks`` in one ``mode``, ``samples`` fixture samples a task."""
    return {
        "name": name,
        "description": f"{', '.join(models)} on {len(tasks)} fixture tasks",
        "models": list(models),
        "tasks": list(tasks),
        "modes": [mode],
        "data": {"kind": "fixture", "seed": 0, "samples_per_task": samples},
    }


def kill_once_answered(argv: Sequence[str], journal: Path, env: dict[str, str], deadline_s: float) -> None:
    """Run ``argv`` and kill its whole process group with SIGKILL once ``journal`` holds an answer; fails
    the test when the job ends first."""
    child = subprocess.Popen(list(argv), env=env, start_new_session=True)
    deadline = time.monotonic() + deadline_s
    while journal_lines(journal) < 1 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if child.poll() is not None:
        pytest.fail(f"the job ended (exit {child.returncode}) before answering in {journal}")
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=deadline_s)
    assert child.returncode == -signal.SIGKILL
