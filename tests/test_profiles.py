"""Scale-out profiles: each dry-runs, and each infer job asks its executor for the right resources."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mini_specs import linked_specs

from milebench.benchmarks.milebench.plan import job_per_cell
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.job_resources import infer_resources, params_billions
from milebench.spec.benchmark import benchmarks

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
MODELS = ["random", "tiny-llava", "llava-1.5-7b", "llava-1.5-13b", "gpt-4o"]
PLUGINS = {
    "slurm": "snakemake_executor_plugin_slurm",
    "kubernetes": "snakemake_executor_plugin_kubernetes",
}


@pytest.fixture(scope="module")
def specs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    specs = linked_specs(tmp_path_factory.mktemp("profiles") / "specs")
    run = {
        "name": "scale",
        "description": "profile dry run",
        "models": MODELS,
        "tasks": ["ActionSequence", "WebQA"],
        "data": {"kind": "fixture", "seed": 0, "samples_per_task": 2},
    }
    (specs / "runs" / "scale.yaml").write_text(yaml.safe_dump(run))
    return specs


def infer_jobs(output: str) -> dict[tuple[str, str], dict[str, str]]:
    """(model, task) -> the resources Snakemake computed for that infer job; task "*" for a job that
    answers every task of a mode."""
    jobs = {}
    for block in re.split(r"\n(?=\S*rule \w+:)", output):
        if not re.match(r"\S*rule infer(_model_\w+)?:", block.strip()):
            continue
        named, given = re.search(r"wildcards: (.*)", block), re.search(r"resources: (.*)", block)
        assert named is not None and given is not None, block
        wildcards = dict(re.findall(r"(\w+)=([\w.-]+)", named.group(1)))
        resources = dict(re.findall(r"(\w+)=([^,\s]+)", given.group(1)))
        jobs[(wildcards["model"], wildcards.get("task", "*"))] = resources
    return jobs


def config(specs: Path) -> list[str]:
    return ["--config", "run=scale", f"specs={specs}"]


def dry_run_profile(profile: str, specs: Path, cwd: Path, *extra: str) -> str:
    result = subprocess.run(
        [*SNAKEMAKE, "--profile", str(REPO / "profiles" / profile), "-n", *config(specs), *extra],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


@pytest.mark.parametrize("profile", ["workstation", "slurm", "kubernetes"])
def test_profile_dry_runs_with_per_job_gpu_requests(profile: str, specs_dir: Path, tmp_path: Path) -> None:
    if profile in PLUGINS:
        pytest.importorskip(PLUGINS[profile], reason=f"the {profile} executor plugin is not installed")
    extra: list[str] = []
    if profile == "kubernetes":
        # The profile's S3 prefix is a placeholder; a local file system stands in for it here.
        pytest.importorskip("snakemake_storage_plugin_fs", reason="snakemake-storage-plugin-fs not installed")
        extra = ["--default-storage-provider", "fs", "--default-storage-prefix", str(tmp_path / "store")]
    jobs = infer_jobs(dry_run_profile(profile, specs_dir, tmp_path, *extra))
    # Every model but the baselines (weights loaded once, an API's pre-flight sent once): one job for both
    # tasks, its time limit the sum of the cells'.
    tasks = ("ActionSequence", "WebQA")
    specs = load_specs(specs_dir)
    per_mode = {m for m in MODELS if not job_per_cell(specs.models[m])}
    assert per_mode < set(MODELS)
    assert set(jobs) == {(m, t) for m in set(MODELS) - per_mode for t in tasks} | {(m, "*") for m in per_mode}
    for (model, task), resources in jobs.items():
        wanted = infer_resources(specs.models[model])
        assert int(resources["gpu"]) == wanted.gpu, (model, resources)
        assert int(resources["mem_mb"]) == wanted.mem_mb, (model, resources)
        cells = len(tasks) if task == "*" else 1
        assert int(resources["runtime"]) == wanted.runtime * cells, (model, resources)
        if profile == "slurm":
            assert resources["slurm_partition"] == "FILL-IN-gpu-partition"
        if profile == "kubernetes":
            assert resources["gpu_manufacturer"] == "nvidia"
    assert {m for (m, _), r in jobs.items() if r["gpu"] == "1"} == {"llava-1.5-7b", "llava-1.5-13b"}


@pytest.mark.parametrize("profile", ["slurm", "kubernetes"])
def test_cluster_profiles_keep_fetch_and_report_local(profile: str) -> None:
    config = yaml.safe_load((REPO / "profiles" / profile / "config.yaml").read_text())
    assert config["executor"] == profile
    snakefile = benchmarks()["milebench"].rules_file(REPO).read_text()
    local = re.search(r"localrules:\n((?:    \w+,\n)+)", snakefile)
    assert local is not None
    assert {"fetch", "report", "fixture", "aggregate"} <= {r.strip(" ,") for r in local.group(1).split()}


def test_infer_resources_by_model_kind() -> None:
    specs = load_specs()
    assert infer_resources(specs.models["random"]).gpu == 0
    assert infer_resources(specs.models["gpt-4o"]).gpu == 0
    assert infer_resources(specs.models["tiny-llava"]).gpu == 0
    seven = infer_resources(specs.models["llava-1.5-7b"])
    thirteen = infer_resources(specs.models["llava-1.5-13b"])
    assert seven.gpu == thirteen.gpu == 1
    assert seven.mem_mb == 7 * 2 * 1024 + 8192 and thirteen.mem_mb > seven.mem_mb
    assert params_billions("7B") == 7.0 and params_billions("13.5B") == 13.5
    assert params_billions(None) is None and params_billions("8x7B") is None
