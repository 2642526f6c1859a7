"""The DAG: dry runs of the shipped run specs, and a small end-to-end run through every stage."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from pipeline_runs import E2E_RUN, E2E_TASKS, SNAKEMAKE, run_config

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import applies, cells, job_per_cell, prepare_jobs
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.provenance import read_provenance
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.spec.base import spec_hash
from milebench.spec.model import ApiModel, TinyWeights


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
    # Every model but the built-in baselines has one infer job per mode, answering all the mode's tasks
    # (weights loaded once, an API's pre-flight sent once); the baselines one per cell.
    per_mode = [m.name for m in specs.run_models(run) if not job_per_cell(m)]
    assert 0 < len(per_mode) < len(run.models)
    assert any(isinstance(m.weights, ApiModel) for m in specs.run_models(run) if m.name in per_mode)
    for mode in run.modes:
        assert counts[f"infer_model_{mode.name.lower()}"] == len(per_mode)
    assert counts["infer"] == sum(c.model not in per_mode for c in cells(specs, run))
    assert counts["score"] == n_cells
    # One preprocess job per (task, mode, input regime), however many models share the regime: the
    # unlimited one and one per model with a budget and a tokenizer to count with.
    expected = 0
    for mode in run.modes:
        shared = {model_regime(specs, run, m, mode).model_dump_json() for m in run.models}
        expected += len(shared) * sum(applies(t, mode) for t in specs.run_tasks(run))
    assert counts["preprocess"] == len(prepare_jobs(specs, run)) == expected
    assert counts["fetch"] == 1 and counts["report"] == 1
    assert "fixture" not in counts


def test_smoke_dry_run_builds_fixture_and_tiny_models(tmp_path: Path) -> None:
    specs = load_specs()
    run = specs.run("smoke")
    models = specs.run_models(run)
    n_tasks = len(specs.run_tasks(run))
    counts = dry_run("smoke", tmp_path)
    assert counts["fixture"] == 1
    assert counts["tiny_model"] == sum(isinstance(m.weights, TinyWeights) for m in models) > 0
    baselines = sum(job_per_cell(m) for m in models)
    assert counts["infer"] == baselines * n_tasks > 0  # the random baseline, one job per task
    assert counts["infer_model_multi_image"] == len(models) - baselines  # each other model once, every task
    assert counts["preprocess"] == len(prepare_jobs(specs, run))  # the regimes the models read, per task


def test_the_report_rule_declares_the_provenance_document(tmp_path: Path) -> None:
    """Asked for the LaTeX provenance document alone, Snakemake plans the report job: it is a declared
    output of the rule, not a file the job writes on the side."""
    target = RunPaths.for_run(load_specs().run("smoke")).report_provenance_tex
    result = subprocess.run(
        [*SNAKEMAKE, str(target), "-n", "--quiet", "rules", "--cores", "1", "--config", "run=smoke"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert job_counts(result.stdout + result.stderr)["report"] == 1


@pytest.mark.parametrize("given", ["runs=paper", "limits=5"])
def test_an_unknown_config_key_is_refused_by_name_before_anything_is_planned(
    tmp_path: Path, given: str
) -> None:
    done = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", "--config", given], cwd=tmp_path, capture_output=True, text=True
    )
    key = given.split("=")[0]
    assert done.returncode != 0
    assert f"--config: {key}: unknown key; the workflow reads run, specs," in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr and 'File "' not in done.stdout + done.stderr
    assert not (tmp_path / "results").exists()


def test_a_config_value_of_the_wrong_type_is_refused_by_its_key(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", "--config", "image_base=[1, 2]"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "--config: image_base: Input should be a valid string" in done.stdout + done.stderr


def snakemake(cwd: Path, *args: str) -> str:
    result = subprocess.run([*SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def e2e_config(root: Path) -> list[str]:
    return run_config(root, E2E_RUN)


@pytest.fixture
def e2e(e2e_run: Path) -> Path:
    """The session's small run (``conftest.py``): fixture -> fetch -> preprocess -> infer -> score -> report
    on three tasks with real commands. Read, never changed."""
    return e2e_run


@pytest.fixture
def e2e_copy(e2e_run: Path, tmp_path: Path) -> Path:
    """A copy of the session's small run, its files' times kept, for a test that edits or runs Snakemake in
    it."""
    return Path(shutil.copytree(e2e_run, tmp_path / "e2e"))


@pytest.mark.slow
def test_end_to_end_small_run(e2e: Path) -> None:
    html = (e2e / "reports" / "e2e" / "report.html").read_text()
    tasks = re.search(r'<table class="tasks" id="tasks-multi-image">(.*?)</table>', html, re.S)
    assert tasks
    for task in E2E_TASKS:
        row = re.search(rf'<tr data-task="{task}">(.*?)</tr>', tasks.group(1), re.S)
        assert row, task
        oracle = (
            '<td data-model="oracle" title="2/2 scored, 0 missing, 0 failed; scored-only 100.0">100.0</td>'
        )
        assert oracle in row.group(1), task
    assert (e2e / "reports" / "e2e" / "report.tex").read_text().strip()
    assert (e2e / "reports" / "e2e" / "figures").is_dir()
    for task in E2E_TASKS:
        score = json.loads((e2e / f"results/e2e/scores/oracle/multi-image/{task}.json").read_text())
        assert score["score"] == pytest.approx(100.0), task
        assert score["n_scored"] == 2
    # every job leaves a benchmark record
    assert len(list((e2e / "results/e2e/benchmarks/infer").glob("*.tsv"))) == 2 * len(E2E_TASKS)
    assert (e2e / "results/e2e/benchmarks/report/report.tsv").is_file()


@pytest.mark.slow
def test_complete_run_has_nothing_to_do(e2e_copy: Path) -> None:
    out = snakemake(e2e_copy, "-n", "--cores", "1", *e2e_config(e2e_copy))
    assert "Nothing to be done" in out, out[-2000:]


@pytest.mark.slow
def test_generation_edit_replans_only_that_models_jobs(e2e_copy: Path) -> None:
    """Changing oracle's max_new_tokens re-plans oracle's infer and score jobs and the report only."""
    spec_file = e2e_copy / "specs" / "models" / "oracle.yaml"
    spec = yaml.safe_load(spec_file.read_text())
    spec.setdefault("generation", {})["max_new_tokens"] = 7
    spec_file.write_text(yaml.safe_dump(spec))
    out = snakemake(e2e_copy, "-n", "--cores", "1", *e2e_config(e2e_copy))
    counts = job_counts(out)
    n = len(E2E_TASKS)
    assert counts == {"infer": n, "score": n, "aggregate": 1, "report": 1, "all": 1}, counts
    outputs = re.findall(r"^rule infer:\n(?:.*\n)*?\s+output: (.*)", out, re.M)
    assert len(outputs) == n and all("results/e2e/predictions/oracle/" in o for o in outputs), outputs
    # the infer jobs are re-planned for their params (the model spec's hash), everything after them
    # only because their inputs will change
    reasons = re.findall(r"^(?:local)?rule (\w+):\n(?:.*\n)*?\s+reason: (.*)", out, re.M)
    assert sorted(rule for rule, why in reasons if why.startswith("Params have changed")) == ["infer"] * n
    assert all(
        why.startswith("Input files updated by another job") for rule, why in reasons if rule != "infer"
    )


@pytest.mark.slow
def test_task_spec_edit_replans_its_preprocess_and_scores(e2e_copy: Path) -> None:
    spec_file = e2e_copy / "specs" / "tasks" / "GPR1200.yaml"
    spec = yaml.safe_load(spec_file.read_text())
    spec["display_name"] = spec.get("display_name", "GPR1200") + " (edited)"
    spec_file.write_text(yaml.safe_dump(spec))
    counts = job_counts(snakemake(e2e_copy, "-n", "--quiet", "rules", "--cores", "1", *e2e_config(e2e_copy)))
    # one prepared file (both models read the unlimited regime), then both models' infer and score
    assert counts == {"preprocess": 1, "infer": 2, "score": 2, "aggregate": 1, "report": 1, "all": 1}, counts


@pytest.mark.slow
def test_named_targets(e2e_copy: Path) -> None:
    """Per-claim targets: one model's column, the main table and the aggregate are up to date."""
    config = e2e_config(e2e_copy)
    for target in ("model_oracle", "main_table", "aggregate"):
        assert "Nothing to be done" in snakemake(e2e_copy, "-n", "--cores", "1", *config, "--", target)


@pytest.mark.slow
def test_the_report_renders_the_aggregate_that_the_default_target_builds(e2e_copy: Path) -> None:
    """aggregate.json and verdict.json are built by the default target and are inputs of the report."""
    out = e2e_copy / "results" / "e2e"
    aggregate = json.loads((out / "aggregate.json").read_text())
    oracle = next(m for m in aggregate["models"] if m["model"] == "oracle")
    assert oracle["columns"]["ActionSequence"]["value"] == pytest.approx(100.0)
    assert json.loads((out / "verdict.json").read_text())["run"] == "e2e"
    (out / "verdict.json").unlink()
    counts = job_counts(snakemake(e2e_copy, "-n", "--quiet", "rules", "--cores", "1", *e2e_config(e2e_copy)))
    assert counts == {"aggregate": 1, "report": 1, "all": 1}, counts


@pytest.mark.parametrize("run", ["smoke", "embed-smoke"])
def test_lint_is_clean(tmp_path: Path, run: str) -> None:
    """Both benchmarks' rules: with the MMLongEmbed file included, the Snakefile's helpers must live in
    rules/common.smk (Snakemake flags rules and functions mixed in one of several files)."""
    config = ["--config", f"run={run}"]
    result = subprocess.run([*SNAKEMAKE, "--lint", *config], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Lints for" not in result.stdout + result.stderr


@pytest.mark.slow
def test_every_infer_and_score_output_has_provenance(e2e: Path) -> None:
    specs = load_specs(e2e / "specs")
    fetch = json.loads((e2e / "results/e2e/data/fetch.json").read_text())
    archives = {a["name"]: a["sha256"] for a in fetch["archives"]}
    for model in ("random", "oracle"):
        for task in E2E_TASKS:
            for stage, path in (
                ("infer", f"predictions/{model}/multi-image/{task}.jsonl.provenance.json"),
                ("score", f"scores/{model}/multi-image/{task}.json.provenance.json"),
            ):
                record = read_provenance(e2e / "results/e2e" / path)
                assert (record.stage, record.model, record.task, record.mode) == (
                    stage,
                    model,
                    task,
                    "multi-image",
                )
                assert record.specs["model"] == spec_hash(specs.models[model])
                assert record.specs["task"] == spec_hash(specs.tasks[task])
                assert record.data is not None and record.data.archives == archives
                assert record.seeds == {"generation": 0, "fixture": 1}
                assert record.weights_revision == "builtin"
                assert record.environment.torch == "not loaded"  # builtin models never import torch
                assert "pydantic" in record.environment.packages
                assert record.started_at <= record.finished_at
    html = (e2e / "reports" / "e2e" / "report.html").read_text()
    assert "job environment 1" in html and "infer oracle/multi-image/GPR1200" in html
