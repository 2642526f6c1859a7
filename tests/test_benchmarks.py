"""A run spec names its benchmark, and that name (never the run's folder) picks the Snakemake rules."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml
from package_copy import run_with

import milebench
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.spec.base import load_spec, spec_hash
from milebench.spec.folder import DEFAULT_SPECS

REPO = Path(__file__).resolve().parents[1]

TOY_PACKAGE = {
    "__init__.py": '''
        """A third benchmark in a distribution of its own: one declaration, its specs, rules and command."""

        from typing import Literal

        from milebench.spec.base import Spec
        from milebench.spec.benchmark import Benchmark, SpecKind


        class ToyRun(Spec):
            name: str
            benchmark: Literal["toybench"]
            words: int


        class ToyNote(Spec):
            name: str
            text: str


        BENCHMARK = Benchmark(
            name="toybench",
            specs="toybench:specs",
            rules="toybench:rules.smk",
            run_model="toybench:ToyRun",
            kinds={"note": SpecKind(model="toybench:ToyNote", files="notes/")},
            check="toybench.cli:check_specs",
            commands="toybench.cli:add_commands",
        )
    ''',
    "cli.py": """
        def add_commands(add):
            p = add("toy-count", "toybench.cli:count", "Toybench: write the run's word count.")
            p.add_argument("--run", required=True)
            p.add_argument("--out", required=True)


        def count(args):
            from pathlib import Path

            from milebench.spec.base import load_spec
            from milebench.spec.benchmark import benchmarks

            from toybench import ToyRun

            folder = benchmarks()["toybench"].runs_folder(args.specs)
            run = load_spec(folder / f"{args.run}.yaml", ToyRun)
            Path(args.out).write_text(f"{run.words}\\n")
            return 0


        def check_specs(specs_root):
            from milebench.spec.base import SpecError, load_spec
            from milebench.spec.benchmark import benchmarks

            from toybench import ToyNote

            folder = benchmarks()["toybench"].folder(specs_root)
            notes = [load_spec(p, ToyNote) for p in sorted((folder / "notes").glob("*.yaml"))]
            if any(not n.text for n in notes):
                raise SpecError(folder / "notes", [("text", "a note says something")])
            return f"{len(notes)} notes"
    """,
    "rules.smk": """
        BENCHMARK_TARGETS = [f"toy/{BENCHMARK_RUN}.txt"]


        rule toy_count:
            output:
                "toy/{run}.txt",
            shell:
                "{MB} toy-count --run {wildcards.run} --out {output}"
    """,
    "specs/runs/toy-run.yaml": "name: toy-run\nbenchmark: toybench\nwords: 7\n",
    "specs/notes/hello.yaml": "name: hello\ntext: Hello.\n",
}


def distribution(tmp_path: Path, package: dict[str, str], entry_point: str) -> Path:
    """A folder to put on PYTHONPATH holding ``toybench`` and its distribution metadata, whose one
    entry point of group milebench.benchmarks is ``entry_point``: as pip installs a wheel."""
    site = tmp_path / "site"
    for name, text in package.items():
        path = site / "toybench" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    meta = site / "toybench-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: toybench\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(f"[milebench.benchmarks]\ntoybench = {entry_point}\n")
    return site


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


@pytest.mark.slow
def test_a_benchmark_outside_the_kit_plugs_in_by_one_entry_point(tmp_path: Path) -> None:
    """Its command, rules and specs come from its own package; the kit's files are used as they are."""
    site = distribution(tmp_path, TOY_PACKAGE, "toybench:BENCHMARK")
    listed = run_with(site, ["-m", "milebench", "--help"])
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert re.search(r"^toybench:\n(  .*\n)*  toy-count ", listed.stdout, re.M), "listed under its own name"
    work = tmp_path / "work"
    done = snakemake(site, REPO, "toy-run", DEFAULT_SPECS, "--directory", str(work))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (work / "toy" / "toy-run.txt").read_text() == "7\n"


def test_a_benchmark_outside_the_kit_has_its_spec_kinds_checked_and_published(tmp_path: Path) -> None:
    """check-specs validates the files of every kind it declares, then says what its own check found; a
    broken file of its kind is named with its field (exit 2); export-schemas publishes a schema per kind."""
    site = distribution(tmp_path, TOY_PACKAGE, "toybench:BENCHMARK")
    done = run_with(site, ["-m", "milebench", "check-specs"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "toybench specs OK: 1 notes" in done.stderr and "MileBench specs OK" in done.stderr
    out = tmp_path / "schemas"
    done = run_with(site, ["-m", "milebench", "export-schemas", "--out", str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in (out / "toybench").iterdir()) == ["note.schema.json", "run.schema.json"]
    bad = site / "toybench" / "specs" / "notes" / "bad.yaml"
    bad.write_text("name: other\ntext: Named not as its file.\n")  # its own check would pass it
    done = run_with(site, ["-m", "milebench", "check-specs"])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{bad}: name: 'other' must equal the file name 'bad'" in done.stderr
    bad.write_text("name: bad\ntext: ''\n")
    done = run_with(site, ["-m", "milebench", "check-specs"])
    assert done.returncode == 2 and "a note says something" in done.stderr


def test_a_declaration_naming_a_missing_class_is_a_named_error(tmp_path: Path) -> None:
    """A spec kind whose model is not in its module: check-specs names the reference, exit 2."""
    package = {
        **TOY_PACKAGE,
        "__init__.py": TOY_PACKAGE["__init__.py"].replace('"toybench:ToyNote"', '"toybench:NoNote"'),
    }
    site = distribution(tmp_path, package, "toybench:BENCHMARK")
    done = run_with(site, ["-m", "milebench", "check-specs"])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "'toybench:NoNote' of a milebench benchmark declaration" in done.stderr


def test_an_entry_point_that_names_no_benchmark_is_named(tmp_path: Path) -> None:
    site = distribution(tmp_path, TOY_PACKAGE, "toybench:ToyRun")
    done = run_with(site, ["-m", "milebench", "--help"])
    assert done.returncode == 2
    assert "entry point toybench = 'toybench:ToyRun' of group milebench.benchmarks: not a milebench" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr


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


def test_the_core_names_no_benchmark() -> None:
    """The import contract sees imports only; a handler, entry or runner named by a ``module:name`` string
    in the core would tie it to a benchmark as surely, so no core file names a benchmark's module."""
    package = Path(milebench.__file__).parent
    core = [p for p in package.rglob("*.py") if "benchmarks" not in p.relative_to(package).parts]
    naming = [str(p.relative_to(package)) for p in core if "milebench.benchmarks." in p.read_text("utf-8")]
    assert len(core) > 50
    assert naming == []


def test_a_run_of_a_benchmark_that_declares_no_bundles_is_not_archived(tmp_path: Path) -> None:
    """`archive` finds the run's benchmark by its run spec and refuses, by name, one without bundle hooks,
    before writing anything."""
    site = distribution(tmp_path, TOY_PACKAGE, "toybench:BENCHMARK")
    out = tmp_path / "bundle"
    done = run_with(site, ["-m", "milebench", "archive", "--run", "toy-run", "--out", str(out)])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "run toy-run: benchmark 'toybench' declares no artifact bundles" in done.stderr
    assert not out.exists() and not list(tmp_path.glob(".bundle.*"))
