"""An API model has one infer job per (model, mode), as a model that loads weights has: one process (one
pre-flight request) answers every task of the mode, each cell with its own journal. Killed in the middle,
its rerun asks only for what was not answered; one cell's failed first samples stop that cell, not the
next. The served model is an OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prepared_runs import fixture_run, journal_lines, kill_once_answered, prepare_run, run_paths
from prepared_runs import infer_argv as infer_job
from served_model import ServedModel, served

from milebench import cli
from milebench.benchmarks.milebench.plan import job_per_cell, mode_tasks
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.infer.adapter import FIRST_FAILURES
from milebench.io import read_jsonl

REPO = Path(__file__).resolve().parents[1]
RUN = "served"
MODEL = "served-vlm"
TASKS = ["ActionSequence", "GPR1200", "MMCoQA"]
"""GPR1200 and MMCoQA are answered one sample per batch, so a kill lands mid-task."""
SAMPLES = FIRST_FAILURES + 1
MODE = "multi-image"
DEADLINE_S = 120.0
"""Upper bound on waiting for the killed job: a guard against hanging, not a timing assertion."""
SPEC = {
    "name": MODEL,
    "display_name": "Served VLM",
    "section": "user",
    "adapter": "openai-chat",
    "weights": {
        "kind": "api",
        "provider": "openai",
        "model_id": "served",
        "base_url": "http://127.0.0.1:9/v1",  # each test's server comes in OPENAI_BASE_URL
        "keyless": True,
        "limits": {"concurrency": 1, "max_retries": 0},
    },
    "notes": "A test server; its context window is its own.",
}


@dataclass
class SlowModel(ServedModel):
    """Answers after ``delay_s``; the first ``failing`` requests are refused with a 500."""

    delay_s: float = 0.0
    failing: int = 0

    def reply(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        time.sleep(self.delay_s)
        with self.lock:
            self.failing -= 1
            refused = self.failing >= 0
        if refused:
            return 500, {"error": {"message": "refused"}}
        return super().reply(path, body)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the served model on three fixture tasks, fetched and prepared by the kit's commands."""
    run = fixture_run(RUN, [MODEL, "random"], TASKS, MODE, SAMPLES)
    return prepare_run(tmp_path_factory.mktemp("served"), run, MODEL, [SPEC])


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowModel]:
    with served(SlowModel(delay_s=0.1)) as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.url)
        yield model


def infer_argv(root: Path, tasks: list[str]) -> list[str]:
    return infer_job(root, RUN, MODEL, tasks, MODE)


def test_the_plan_has_one_infer_job_per_api_model_and_mode(prepared: Path, tmp_path: Path) -> None:
    specs = load_specs(prepared / "specs")
    run = specs.run(RUN)
    per_mode = [m.name for m in specs.run_models(run) if not job_per_cell(m)]
    assert per_mode == [MODEL], "the API model; the random baseline keeps one job per cell"
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "-n", "--quiet", "rules",
         "--cores", "1", "--config", f"specs={prepared / 'specs'}", f"run={RUN}"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", done.stdout + done.stderr, re.M))
    for mode, tasks in mode_tasks(specs, run).items():
        assert int(counts[f"infer_model_{mode.name.lower()}"]) == len(per_mode) and tasks == TASKS
    baseline_cells = (len(run.models) - len(per_mode)) * len(TASKS)
    assert int(counts["infer"]) == baseline_cells


def test_a_killed_api_job_reruns_asking_only_for_what_was_not_answered(
    prepared: Path, tmp_path: Path, server: SlowModel
) -> None:
    root = shutil.copytree(prepared, tmp_path / "killed", symlinks=True)
    paths = run_paths(root, RUN)
    journals = {task: paths.journal(MODEL, task, MODE) for task in TASKS}
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_BASE_URL": server.url}
    argv = [sys.executable, "-m", "milebench", *infer_argv(root, TASKS)]
    kill_once_answered(argv, journals["GPR1200"], env, DEADLINE_S)
    kept = {task: journal_lines(journals[task]) for task in TASKS}
    assert kept["ActionSequence"] == SAMPLES and 1 <= kept["GPR1200"] < SAMPLES and kept["MMCoQA"] == 0, kept
    asked_before = len(server.requests)
    assert asked_before - sum(kept.values()) in (0, 1), "at most the request in flight is lost"

    assert cli.main(infer_argv(root, TASKS)) == 0
    assert len(server.requests) - asked_before == SAMPLES * len(TASKS) - sum(kept.values())
    for task in TASKS:
        answered = [row["sample_id"] for row in read_jsonl(paths.predictions(MODEL, task, MODE))]
        assert answered == list(range(SAMPLES)), task
        assert sorted(row["sample_id"] for row in read_jsonl(journals[task])) == answered


def test_one_cells_failed_first_samples_stop_that_cell_not_the_next(
    prepared: Path, tmp_path: Path, server: SlowModel, caplog: pytest.LogCaptureFixture
) -> None:
    root = shutil.copytree(prepared, tmp_path / "run", symlinks=True)
    paths = run_paths(root, RUN)
    server.failing = FIRST_FAILURES
    assert cli.main(infer_argv(root, TASKS[:2])) == 1
    assert f"the first {FIRST_FAILURES} samples all failed, so the cell stops" in caplog.text
    assert not paths.predictions(MODEL, TASKS[0], MODE).exists()
    answered = list(read_jsonl(paths.predictions(MODEL, TASKS[1], MODE)))
    assert [row["failure"] for row in answered] == [None] * SAMPLES
    assert len(server.requests) == FIRST_FAILURES + SAMPLES, "the stopped cell sent no more"
