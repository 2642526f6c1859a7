"""The DAG: dry runs of the shipped run specs, and a small end-to-end run through every stage."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from milebench.plan import cells, prepare_jobs
from milebench.spec.registry import load_specs

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


def job_counts(output: str) -> dict[str, int]:
    """Parse Snakemake's 'Job stats' table into {rule: count}."""
    counts: dict[str, int] = {}
    for line in output.splitlines():
        match = re.fullmatch(r"(\w+)\s+(\d+)", line.strip())
        if match and match.group(1) != "total":
            counts[match.group(1)] = int(match.group(2))
    return counts


def dry_run(run: str, cwd: Path) -> dict[str, int]:
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--quiet", "rules", "--cores", "1", "--config", f"run={run}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return job_counts(result.stdout + result.stderr)


def test_paper_dry_run_lists_every_job_without_data(tmp_path: Path) -> None:
    specs = load_specs()
    run = specs.run("paper")
    n_cells = len(cells(specs, run))
    counts = dry_run("paper", tmp_path)
    assert counts["infer"] == n_cells
    assert counts["score"] == n_cells
    # One preprocess job per (task, mode, input regime): multi-image and adversarial have the unlimited
    # regime plus llava-1.5-7b, llava-1.5-13b and yi-vl; combined-image adds qwen-vl-chat (no image tokens).
    assert counts["preprocess"] == len(prepare_jobs(specs, run)) == 4 * 29 + 5 * 29 + 4 * 26
    assert counts["fetch"] == 1 and counts["report"] == 1
    assert "fixture" not in counts


def test_smoke_dry_run_builds_fixture_and_tiny_model(tmp_path: Path) -> None:
    counts = dry_run("smoke", tmp_path)
    assert counts["fixture"] == 1
    assert counts["tiny_model"] == 1
    assert counts["infer"] == 2 * 29
    assert counts["preprocess"] == 2 * 29  # random reads the unlimited regime, tiny-llava its own


def test_end_to_end_small_run(tmp_path: Path) -> None:
    """fixture -> fetch -> preprocess -> infer -> score -> report on three tasks with real commands."""
    specs_dir = tmp_path / "specs"
    shutil.copytree(REPO / "specs", specs_dir)
    tasks = ["ActionSequence", "GPR1200", "TextNeedleInAHaystack"]
    (specs_dir / "runs" / "e2e.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "e2e",
                "description": "end-to-end test",
                "models": ["random", "oracle"],
                "tasks": tasks,
                "modes": ["multi-image"],
                "data": {"kind": "fixture", "seed": 1, "samples_per_task": 2},
            }
        )
    )
    subprocess.run(
        [*SNAKEMAKE, "--cores", "2", "--config", "run=e2e", f"specs={specs_dir}"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    html = (tmp_path / "reports" / "e2e" / "report.html").read_text()
    assert "Oracle" in html or "oracle" in html
    assert (tmp_path / "reports" / "e2e" / "report.tex").read_text().strip()
    for task in tasks:
        score = json.loads((tmp_path / f"results/e2e/scores/oracle/multi-image/{task}.json").read_text())
        assert score["score"] == pytest.approx(100.0), task
        assert score["n_scored"] == 2
