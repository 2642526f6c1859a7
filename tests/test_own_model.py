"""A user's own served model: the documented two-file specs folder (docs/own-model.md) overlays the shipped
one, runs end to end against an OpenAI-compatible server on 127.0.0.1 without a key, and a missing key,
a dead endpoint or an endpoint that fails every sample stops the run early, saying why."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from mini_specs import linked_specs
from served_model import ServedModel, free_port, served

from milebench import cli
from milebench.benchmarks.milebench.paper import load_paper
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import QuestionType
from milebench.infer.adapter import FIRST_FAILURES, AdapterError, Preflight
from milebench.infer.api.prerequisites import missing_prerequisites
from milebench.infer.engine import run_model
from milebench.infer.records import Prediction
from milebench.infer.registry import load_adapter
from milebench.io import read_jsonl
from milebench.spec.base import SpecError
from milebench.spec.benchmark import benchmark_of_run
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.model import ModelSpec

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "own-model.md"
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
KEY_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL")


def documented() -> dict[str, dict[str, Any]]:
    """The spec files the guide shows, by the path its first comment line gives them."""
    blocks = re.findall(r"```yaml\n# (\S+)\n(.*?)```", DOC.read_text(), re.S)
    assert blocks, f"{DOC}: no spec files shown"
    return {path: yaml.safe_load(text) for path, text in blocks}


def model_file() -> dict[str, Any]:
    return next(spec for path, spec in documented().items() if "/models/" in path)


def run_file() -> dict[str, Any]:
    return next(spec for path, spec in documented().items() if "/runs/" in path)


def user_folder(root: Path, url: str, data: dict[str, Any] | None = None) -> Path:
    """The guide's folder, the model served at ``url`` and (for tests) fixture data in place of a tree."""
    folder = root / "my-specs"
    for path, spec in documented().items():
        spec = json.loads(json.dumps(spec))
        if "/models/" in path:
            spec["weights"]["base_url"] = url
        if "/runs/" in path and data is not None:
            spec["data"] = data
        target = folder / Path(path).relative_to("my-specs")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def spec_at(url: str, **weights: Any) -> ModelSpec:
    fields = model_file()
    return ModelSpec.model_validate(fields | {"weights": fields["weights"] | {"base_url": url, **weights}})


def text_samples(n: int) -> list[PreparedSample]:
    return [
        PreparedSample(
            task="WebQA",
            mode=Mode.MULTI_IMAGE,
            sample_id=i,
            instruction="Answer the question.",
            context="Which is red?\nChoice list: \nA. a\nB. b\nYour answer is: ",
            images=(),
            image_sha256=(),
            prompt_sha256=f"{i:064x}",
            question_type=QuestionType.MULTI_CHOICE,
            choices=("a", "b"),
            response="a",
            image_quantity_level="Few",
            n_images=0,
        )
        for i in range(n)
    ]


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)


def adapter(spec: ModelSpec, tmp_path: Path) -> Any:
    return load_adapter(spec, RunPaths(out=tmp_path, reports=tmp_path), tmp_path)


# ---------------------------------------------------------------- the specs folder


def test_a_folder_without_paper_spec_overlays_the_shipped_one(tmp_path: Path) -> None:
    folder = user_folder(tmp_path, "http://127.0.0.1:8000/v1")
    shipped_random = (DEFAULT_SPECS / "models" / "random.yaml").read_text()
    (folder / "models" / "random.yaml").write_text(
        shipped_random.replace("display_name:", "display_name: Mine #")
    )
    specs, shipped = load_specs(folder), load_specs()
    assert specs.tasks == shipped.tasks and load_paper(specs) == load_paper(shipped)
    assert set(specs.models) == {*shipped.models, model_file()["name"]}
    assert set(specs.runs) == {*shipped.runs, run_file()["name"]}
    assert specs.models["random"].display_name.startswith("Mine")  # a file of the same name replaces
    assert specs.file("locks/milebench-hub.lock.yaml") == DEFAULT_SPECS / "locks" / "milebench-hub.lock.yaml"
    assert benchmark_of_run(folder, "smoke").name == "milebench"  # shipped runs stay reachable
    assert cli.main(["--specs", str(folder), "check-specs"]) == 0


def test_a_folder_with_its_own_paper_spec_is_whole(tmp_path: Path) -> None:
    folder = linked_specs(tmp_path / "whole")  # the kit's paper, tasks, models; an empty runs/
    with pytest.raises(SpecError, match=re.escape("no *.yaml spec files")):
        load_specs(folder)


# ---------------------------------------------------------------- keys


@pytest.mark.usefixtures("no_key")
def test_a_keyless_endpoint_is_answered_without_any_key(tmp_path: Path) -> None:
    with served(ServedModel(answer="B")) as server:
        spec = spec_at(server.url)
        samples = text_samples(3)
        run_model(adapter(spec, tmp_path), spec, samples, tmp_path / "p.jsonl")
    predictions = [Prediction.model_validate(r) for r in read_jsonl(tmp_path / "p.jsonl")]
    assert [p.response for p in predictions] == ["B"] * len(samples)
    assert len(server.requests) == len(samples)
    assert not any("Authorization" in r["headers"] for r in server.requests)
    assert {r["body"]["model"] for r in server.requests} == {model_file()["weights"]["model_id"]}


def test_every_api_model_without_its_key_is_named_before_the_run(
    no_key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyless, keyed = spec_at("http://127.0.0.1:1/v1"), spec_at("http://127.0.0.1:1/v1", keyless=False)
    shipped = load_specs().models
    assert missing_prerequisites([keyless, shipped["random"]]) == []
    problems = missing_prerequisites([keyless, keyed, shipped["gpt-4o"]])
    assert len(problems) == 2
    assert all("OPENAI_API_KEY" in p and "keyless: true" in p for p in problems)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    assert missing_prerequisites([keyed]) == []


# ---------------------------------------------------------------- dead endpoints


@pytest.mark.usefixtures("no_key")
@pytest.mark.parametrize(
    ("url", "why"),
    [
        (f"http://127.0.0.1:{free_port()}/v1", "connection refused"),
        ("http://no-such-host.invalid/v1", "host"),
    ],
)
def test_a_dead_endpoint_fails_the_job_within_seconds(tmp_path: Path, url: str, why: str) -> None:
    loaded = adapter(spec_at(url), tmp_path)
    assert isinstance(loaded, Preflight)
    start = time.monotonic()
    with pytest.raises(AdapterError, match=f"cannot be reached \\(.*{why}"):
        loaded.preflight()
    assert time.monotonic() - start < 5


@pytest.mark.usefixtures("no_key")
def test_a_cell_whose_first_samples_all_fail_stops_and_says_why(tmp_path: Path) -> None:
    samples = text_samples(4 * FIRST_FAILURES)
    with served(ServedModel(status=404)) as server:  # a wrong model_id: every sample refused alike
        spec = spec_at(server.url)
        start = time.monotonic()
        with pytest.raises(AdapterError, match=f"first {len(samples)} samples all failed.*HTTP 404"):
            run_model(adapter(spec, tmp_path), spec, samples, tmp_path / "p.jsonl", tmp_path / "j.jsonl")
    assert time.monotonic() - start < 5
    concurrency = spec.weights.limits.concurrency  # type: ignore[union-attr]
    assert FIRST_FAILURES <= len(server.requests) < FIRST_FAILURES + concurrency
    assert not (tmp_path / "p.jsonl").exists()  # no complete predictions file; the journal keeps them
    assert len(list(read_jsonl(tmp_path / "j.jsonl"))) == len(samples)


# ---------------------------------------------------------------- the recipe, end to end


def snakemake(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS}
    return subprocess.run([*SNAKEMAKE, *args], cwd=root, capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_the_recipe_evaluates_a_served_model_in_one_command(tmp_path: Path) -> None:
    """The guide's folder and command, on 3 fixture samples per task cut to 2 by ``--config limit=2``."""
    fixture = {"kind": "fixture", "seed": 1, "samples_per_task": 3}
    run, tasks, limit = run_file()["name"], run_file()["tasks"], 2
    with served(ServedModel(answer="A")) as server:
        folder = user_folder(tmp_path, server.url, fixture)
        config = ["--config", "specs=my-specs", f"run={run}", f"limit={limit}"]
        done = snakemake(tmp_path, "--cores", "2", *config)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(server.requests) == limit * len(tasks)
    n = limit * len(tasks)
    assert f"progress: 0 of {n} samples answered (0%)\n" in done.stderr  # before the first job
    assert f"progress: {n} of {n} samples answered (100%), " in done.stderr  # the last line, with a rate
    check = "Pipeline check on fixture data: every sample answered and scored."
    assert f"report: {Path('reports', run, 'report.html')}\n{check}" in done.stderr  # the run's last words
    model = model_file()["name"]
    for task in tasks:
        score = json.loads((tmp_path / f"results/{run}/scores/{model}/multi-image/{task}.json").read_text())
        assert score["n_scored"] == limit, task
    html = (tmp_path / "reports" / run / "report.html").read_text()
    assert "Your models (not in the paper)" in html and model_file()["display_name"] in html
    assert f"Subset: at most {limit} samples per task" in html
    assert not (tmp_path / "results" / run / "verdict.json").exists()  # a subset is never held to the paper

    # The same folder, a run of a model that needs a key: stopped before any job, the reason on the console.
    keyed = model_file() | {"name": "my-keyed-vlm"}
    keyed["weights"] = keyed["weights"] | {"base_url": server.url, "keyless": False}
    (folder / "models" / "my-keyed-vlm.yaml").write_text(yaml.safe_dump(keyed))
    (folder / "runs" / "keyed.yaml").write_text(
        yaml.safe_dump(run_file() | {"name": "keyed", "models": ["my-keyed-vlm"], "data": fixture})
    )
    refused = snakemake(tmp_path, "--cores", "1", "--config", "specs=my-specs", "run=keyed")
    assert refused.returncode != 0
    assert "cannot start the run" in refused.stderr and "OPENAI_API_KEY" in refused.stderr
    assert not (tmp_path / "results" / "keyed").exists()
