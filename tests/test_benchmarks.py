"""A run spec names its benchmark, and that name (never the run's folder) picks the Snakemake rules."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml
from package_copy import package_with, run_with

from milebench.spec.base import load_spec
from milebench.spec.registry import DEFAULT_SPECS, spec_hash
from milebench.spec.run import RunSpec

REPO = Path(__file__).resolve().parents[1]

TOY_BENCHMARK = '''
"""A third benchmark: one module, a specs folder and a rules file."""

from typing import Literal

from milebench.benchmarks import Benchmark
from milebench.spec.base import Spec


class ToyRun(Spec):
    name: str
    benchmark: Literal["toybench"]
    words: int


BENCHMARK = Benchmark(
    name="toybench",
    specs="toybench",
    rules="rules/toybench.smk",
    run_model="milebench.benchmarks.toybench:ToyRun",
)
'''

TOY_RULES = """
from milebench.benchmarks.toybench import ToyRun
from milebench.spec.base import load_spec

TOY = load_spec(SPECS_DIR / "toybench" / "runs" / f"{BENCHMARK_RUN}.yaml", ToyRun)
BENCHMARK_TARGETS = [f"toy/{TOY.name}.txt"]


rule toy_count:
    output:
        "toy/{run}.txt",
    shell:
        "echo {TOY.words} > {output}"
"""


def snakemake(
    root: Path, workdir: Path, run: str, specs: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    argv = ["-m", "snakemake", "--snakefile", str(workdir / "Snakefile"), "--cores", "1", *args]
    return run_with(root, [*argv, "--config", f"specs={specs}", f"run={run}"], cwd=workdir)


def specs_copy(tmp_path: Path) -> Path:
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    return specs


def test_a_milebench_run_spec_names_its_benchmark_by_default_and_keeps_its_hash() -> None:
    smoke = load_spec(DEFAULT_SPECS / "runs" / "smoke.yaml", RunSpec)
    named = RunSpec.model_validate({**smoke.model_dump(), "benchmark": "milebench"})
    assert smoke.benchmark == named.benchmark == "milebench"
    assert spec_hash(named) == spec_hash(smoke)  # nothing already computed re-runs


def test_an_unknown_benchmark_is_a_named_error(tmp_path: Path) -> None:
    specs = specs_copy(tmp_path)
    run = yaml.safe_load((specs / "mmlongembed" / "runs" / "embed-smoke.yaml").read_text())
    path = specs / "mmlongembed" / "runs" / "trec-run.yaml"
    path.write_text(yaml.safe_dump({**run, "name": "trec-run", "benchmark": "trec"}))
    done = snakemake(REPO, REPO, "trec-run", specs, "-n")
    assert done.returncode != 0
    assert (
        f"{path}: benchmark: unknown benchmark 'trec'; known: milebench, mmlongembed"
        in done.stdout + done.stderr
    )


def test_a_run_in_another_benchmarks_folder_is_refused_by_its_field(tmp_path: Path) -> None:
    specs = specs_copy(tmp_path)
    smoke = yaml.safe_load((specs / "runs" / "smoke.yaml").read_text())
    path = specs / "runs" / "odd.yaml"
    path.write_text(yaml.safe_dump({**smoke, "name": "odd", "benchmark": "mmlongembed"}))
    done = snakemake(REPO, REPO, "odd", specs, "-n")
    assert done.returncode != 0
    assert f"{path}: benchmark: runs of 'mmlongembed' belong in {specs / 'mmlongembed' / 'runs'}" in (
        done.stdout + done.stderr
    )


def test_a_third_benchmark_is_a_module_specs_and_a_rules_file(tmp_path: Path) -> None:
    site = package_with(tmp_path, {"benchmarks/toybench.py": TOY_BENCHMARK})
    workdir = tmp_path / "work"
    workdir.mkdir()
    shutil.copy(REPO / "Snakefile", workdir / "Snakefile")
    shutil.copytree(REPO / "rules", workdir / "rules")
    (workdir / "rules" / "toybench.smk").write_text(TOY_RULES)
    specs = specs_copy(tmp_path)
    (specs / "toybench" / "runs").mkdir(parents=True)
    run = {"name": "toy-run", "benchmark": "toybench", "words": 7}
    (specs / "toybench" / "runs" / "toy-run.yaml").write_text(yaml.safe_dump(run))
    done = snakemake(site, workdir, "toy-run", specs)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (workdir / "toy" / "toy-run.txt").read_text() == "7\n"


def test_a_run_parses_only_its_own_benchmarks_rules_and_specs(tmp_path: Path) -> None:
    """Each run plans with the other benchmark's run spec broken: its rules file is never included. The
    plans are made in a folder of their own, so results the checkout already holds do not empty them."""
    specs = specs_copy(tmp_path)
    fresh = ("--directory", str(tmp_path / "work"))
    smoke, embed = specs / "runs" / "smoke.yaml", specs / "mmlongembed" / "runs" / "embed-smoke.yaml"
    kept = smoke.read_text()
    smoke.write_text("name: smoke\nmodels: 7\n")
    done = snakemake(REPO, REPO, "embed-smoke", specs, *fresh, "-n", "--quiet", "rules")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "embed_report" in done.stdout + done.stderr
    smoke.write_text(kept)
    embed.write_text("name: embed-smoke\nmodels: 7\n")
    done = snakemake(REPO, REPO, "smoke", specs, *fresh, "-n", "--quiet", "rules")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "report" in done.stdout + done.stderr and "embed_report" not in done.stdout + done.stderr
