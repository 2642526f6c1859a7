"""The full Visual Grounding run (embed-vg) plans through Snakemake and has the paper's shape: 8 length
bins (256 to 32,768 tokens) x 6 depths (0% to 100%), 25 candidates per cell, for each needle modality
and interference. Counts come from the spec and the needle lists the generator uses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from milebench.benchmarks.mmlongembed.needles import image_needles, text_needles
from milebench.benchmarks.mmlongembed.spec import load_embed_specs
from milebench.spec.registry import DEFAULT_SPECS

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


def test_embed_vg_has_the_papers_bins_depths_and_cell_size() -> None:
    vg = load_embed_specs(DEFAULT_SPECS).run("embed-vg").visual_grounding
    assert vg.bins == tuple(256 * 2**i for i in range(8))
    assert vg.depths == (0, 20, 40, 60, 80, 100)
    assert len(text_needles(vg.families)) == len(image_needles(vg.families)) == 25
    assert set(vg.needle_modalities) == {"text", "image"}
    assert {m.value for m in vg.interference} == {"text", "image", "mixed"}


def test_embed_vg_plans_every_stage(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SNAKEMAKE, "-n", "--config", "run=embed-vg"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for rule in ("embed_generate", "embed_run", "embed_evaluate", "embed_aggregate", "embed_report"):
        assert rule in done.stdout
