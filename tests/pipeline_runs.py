"""Small runs of the kit through Snakemake, and the session fixtures' runs made of them (``conftest.py``):
a whole pipeline takes minutes on a shared CPU, so the tests that read the same run share one.

``E2E_RUN``: Random and Oracle on three tasks (every stage with built-in models). ``AUDITED_RUN``: Random and
the tiny LLaVA on two tasks, every ``milebench`` process audited (``audit/``), archived with its data and
weights. Tests read these runs; one that changes a file works on a copy (``shutil.copytree`` keeps the
times Snakemake compares).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from milebench import cli
from milebench.spec.folder import DEFAULT_SPECS

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
AUDIT = Path(__file__).resolve().parent / "audit"
TASKS = ["ActionSequence", "TextNeedleInAHaystack"]
E2E_RUN, E2E_MODELS = "e2e", ["random", "oracle"]
E2E_TASKS = ["ActionSequence", "GPR1200", "TextNeedleInAHaystack"]
AUDITED_RUN, AUDITED_MODELS = "audited", ["random", "tiny-llava"]


def write_run(
    root: Path, name: str, models: list[str], samples: int = 2, tasks: list[str] = TASKS
) -> list[str]:
    """A copy of the kit's specs with a run of ``models`` on ``tasks``; returns Snakemake's --config."""
    specs = root / "specs"
    root.mkdir(parents=True, exist_ok=True)
    if not specs.exists():
        shutil.copytree(DEFAULT_SPECS, specs)
    run = {
        "name": name,
        "description": f"{', '.join(models)} on {len(tasks)} fixture tasks",
        "models": models,
        "tasks": tasks,
        "modes": ["multi-image"],
        "data": {"kind": "fixture", "seed": 1, "samples_per_task": samples},
    }
    (specs / "runs" / f"{name}.yaml").write_text(yaml.safe_dump(run))
    return run_config(root, name)


def run_config(root: Path, name: str) -> list[str]:
    """Snakemake's --config for run ``name`` of the specs under ``root``."""
    return ["--config", f"run={name}", f"specs={root / 'specs'}"]


def snakemake(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    root.mkdir(parents=True, exist_ok=True)
    result = subprocess.run([*SNAKEMAKE, *args], cwd=root, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def audited_snakemake(root: Path, config: list[str]) -> None:
    """Run through Snakemake with every ``milebench`` process audited: what each process touched in
    ``audit/``, what each job's rule declares in ``declared.tsv`` (``snakemake --detailed-summary``)."""
    records = root / "audit"
    records.mkdir()
    path = os.pathsep.join([str(AUDIT), str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "MILEBENCH_AUDIT": str(records)}
    snakemake(root, "--cores", "2", *config, env=env)
    (root / "declared.tsv").write_text(snakemake(root, "--detailed-summary", "--cores", "1", *config))


def archive(root: Path, run: str, out: Path, *options: str) -> int:
    """``milebench archive`` of ``run`` under ``root`` without images."""
    argv = ["--specs", str(root / "specs"), "archive", "--run", run, "--root", str(root), "--out", str(out)]
    return cli.main([*argv, "--no-images", *options])
