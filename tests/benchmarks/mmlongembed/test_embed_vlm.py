"""The Qwen2-VL / Qwen3-VL embedding adapter on tiny random models built offline and loaded through
``from_pretrained``: the vector is the last token's final hidden state, L2-normalised; text and images
reach the model in document order; the window cut happens before processing and keeps an image whole
or drops it, at the exact budget boundary."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
import torch
from PIL import Image

from milebench.benchmarks.mmlongembed.embedders import ModelInput, load_adapter
from milebench.benchmarks.mmlongembed.records import Candidate, Pool, Query
from milebench.benchmarks.mmlongembed.spec import ApiEmbedder, EmbedderSpec, VlmEmbedder, load_embed_specs
from milebench.benchmarks.mmlongembed.vlm import VlmEmbedAdapter
from milebench.record_files import RecordError
from milebench.spec.adapters import adapter_kinds
from milebench.spec.base import SpecError
from milebench.spec.folder import DEFAULT_SPECS

KINDS = ("hf-qwen2-vl-embed", "hf-qwen3-vl-embed")
GME_FRAME = (
    "<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{content}<|im_end|>\n"
    "<|im_start|>assistant\n<|endoftext|>"
)
HEAD = "The first band to play on the Moon was the Virtual Rocket Band."
TAIL = "The car turns right at the crossing; the truck goes straight ahead and stops."
PICTURE = "images/red.png"
SIZE = (48, 32)
"""Width, height: 3 x 2 merged 16-pixel patches, 6 image tokens in the tiny models."""


def spec(kind: str, window: int = 4096, min_tokens: int = 1) -> VlmEmbedder:
    return VlmEmbedder(
        name=f"tiny-{kind}",
        kind=kind,  # type: ignore[arg-type]
        family="tiny",
        weights={"kind": "tiny", "seed": 3},  # type: ignore[arg-type]
        window=window,
        template=GME_FRAME,
        query_instruction="Find the document.",
        document_instruction="You are a helpful assistant.",
        min_image_tokens=min_tokens,
        max_image_tokens=16,
        dtype="float32",
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("set")
    (root / "images").mkdir()
    Image.new("RGB", SIZE, (200, 20, 20)).save(root / PICTURE)
    return root


_adapters: dict[tuple[str, int, int], VlmEmbedAdapter] = {}


def adapter(kind: str, data: Path, window: int = 4096, min_tokens: int = 1) -> VlmEmbedAdapter:
    if (kind, window, min_tokens) not in _adapters:
        cache = data / f"cache-{kind}-{window}-{min_tokens}.jsonl"
        loaded = load_adapter(spec(kind, window, min_tokens), cache, 1, [data])
        assert isinstance(loaded, VlmEmbedAdapter)
        _adapters[kind, window, min_tokens] = loaded
    return _adapters[kind, window, min_tokens]


def text(value: str) -> dict[str, Any]:
    return {"kind": "text", "text": value, "tokens": 1}


def image() -> dict[str, Any]:
    return {
        "kind": "image",
        "image": PICTURE,
        "sha256": "0" * 64,
        "width": SIZE[0],
        "height": SIZE[1],
        "tokens": 1,
    }


def candidate(segments: list[dict[str, Any]], needle: int = 1, cid: str = "c") -> Candidate:
    return Candidate.model_validate(
        {
            "id": cid,
            "segments": segments,
            "length": len(segments),
            "bin": 256,
            "depth": 0,
            "realised_depth": 0.0,
            "needle_segment": needle,
            "interference": "mixed",
        }
    )


def encoded(ad: VlmEmbedAdapter, c: Candidate) -> list[int]:
    item = ad.read(c)
    batch = ad.inputs([item.text], ad.load_images(item) or None)
    ids: list[int] = batch["input_ids"][0]
    return ids


def pad_id(ad: VlmEmbedAdapter) -> int:
    (pad,) = ad.tokenizer.encode([ad.inputs.image_token])[0]
    return pad


def find(ids: list[int], part: list[int]) -> int:
    return next(i for i in range(len(ids)) if ids[i : i + len(part)] == part)


@pytest.mark.parametrize("kind", KINDS)
def test_vector_is_the_last_tokens_final_hidden_state_l2_normalised(kind: str, data: Path) -> None:
    ad = adapter(kind, data)
    item = ad.read(candidate([text(HEAD), image(), text(TAIL)]))
    batch = ad.inputs([item.text], ad.load_images(item), return_tensors="pt")
    with torch.inference_mode():
        states = ad.model(**batch, output_hidden_states=True).hidden_states[-1][0].numpy()
    last = states[-1].astype(np.float64)
    by_hand = last / np.sqrt((last**2).sum())
    assert np.allclose(ad.embed(item), by_hand, atol=1e-6)
    assert not np.allclose(ad.embed(item), states[-2] / np.linalg.norm(states[-2]), atol=1e-3)


@pytest.mark.parametrize("kind", KINDS)
def test_pieces_reach_the_model_in_document_order(kind: str, data: Path) -> None:
    ad = adapter(kind, data)
    head, tail = (ad.tokenizer.encode([t])[0] for t in (HEAD, TAIL))
    pad = pad_id(ad)
    forward = encoded(ad, candidate([text(HEAD), image(), text(TAIL)]))
    swapped = encoded(ad, candidate([text(TAIL), image(), text(HEAD)]))
    assert forward != swapped
    for ids, first, second in ((forward, head, tail), (swapped, tail, head)):
        pads = [i for i, t in enumerate(ids) if t == pad]
        assert find(ids, first) < pads[0] and pads[-1] < find(ids, second)
    text_first = encoded(ad, candidate([text(HEAD), text(TAIL), image()], needle=2))
    joined = ad.tokenizer.encode([ad.spec.separator + TAIL])[0]
    assert find(text_first, head) < find(text_first, joined) < text_first.index(pad)


@pytest.mark.parametrize("kind", KINDS)
def test_image_tokens_are_what_the_processor_makes(kind: str, data: Path) -> None:
    ad = adapter(kind, data)
    ids = encoded(ad, candidate([text(HEAD), image(), text(TAIL)]))
    assert ids.count(pad_id(ad)) == ad.image_tokens(*SIZE) == 6


def test_a_small_picture_is_enlarged_to_the_families_minimum(data: Path) -> None:
    """GME and Ops-MM give every image at least 256 tokens: the processor enlarges it, and the cut
    counts what the processor makes (here a 3 x 2 token picture under a minimum of 12)."""
    ad = adapter(KINDS[0], data, min_tokens=12)
    ids = encoded(ad, candidate([text(HEAD), image(), text(TAIL)]))
    assert ids.count(pad_id(ad)) == ad.image_tokens(*SIZE) >= 12


def frame_tokens(ad: VlmEmbedAdapter) -> int:
    return ad.length(ad.frame(ad.spec.document_instruction, ""), [])


@pytest.mark.parametrize("spare", [0, -1])
def test_cut_keeps_an_image_whole_or_drops_it_at_the_budget_boundary(spare: int, data: Path) -> None:
    """Head budget = window - frame, halved (rounded up): exactly room for HEAD and the picture (its 6
    image tokens and its vision start and end markers), or one token short, in which case the picture
    goes whole and nothing of it reaches the model."""
    probe = adapter(KINDS[0], data)
    head = len(probe.tokenizer.encode([HEAD])[0])
    budget = 2 * (head + 6 + 2 + spare)
    ad = adapter(KINDS[0], data, window=frame_tokens(probe) + budget)
    c = candidate([text(HEAD), image(), text(TAIL * 8)])
    item = ad.read(c)
    ids = encoded(ad, c)
    pads = ids.count(pad_id(ad))
    assert len(ids) <= ad.spec.window
    if spare == 0:
        assert (item.needle, item.images, pads) == ("whole", (PICTURE,), 6)
    else:
        assert (item.needle, item.images, pads) == ("dropped", (), 0)
    assert find(ids, probe.tokenizer.encode([HEAD])[0]) >= 0


def test_window_is_never_exceeded_and_head_and_tail_survive(data: Path) -> None:
    probe = adapter(KINDS[0], data)
    ad = adapter(KINDS[0], data, window=frame_tokens(probe) + 100)
    c = candidate([text(HEAD), *[image(), text(TAIL)] * 20, text(HEAD)], needle=0)
    ids = encoded(ad, c)
    item = ad.read(c)
    assert len(ids) <= ad.spec.window
    assert ids.count(pad_id(ad)) % 6 == 0
    assert item.needle == "whole" and item.length is not None and item.length <= 100
    assert ad.tokenizer.decode(ids).count(HEAD) == 2


def test_scores_are_cosines_and_reuse_the_journal(data: Path) -> None:
    ad = adapter(KINDS[1], data)
    cands = {c.id: c for c in (candidate([text(HEAD), image()], cid="a"), candidate([text(TAIL)], 0, "b"))}
    inputs = {cid: ad.read(c) for cid, c in cands.items()}
    query = Query(
        id="q",
        text="band on the Moon",
        subset="s",
        bin=256,
        depth=0,
        needle_modality="text",
        interference="mixed",
        family="f",
        entity="e",
    )
    pools = {"q": Pool(query="q", candidates=("a", "b"))}
    scores = ad.score([query], pools, inputs)["q"]
    q = ad.embed(ModelInput(text=ad.frame("Find the document.", query.text), length=None, needle=""))
    assert scores["a"] == pytest.approx(float(q @ ad.embed(inputs["a"])), abs=1e-6)
    lines = ad.cache.read_text().splitlines()
    assert ad.score([query], pools, inputs)["q"] == scores
    assert ad.cache.read_text().splitlines() == lines


PAPER_MODELS = {
    "qwen3-vl-embedding-2b": "Qwen3-VL-Embedding",
    "qwen3-vl-embedding-8b": "Qwen3-VL-Embedding",
    "gme-qwen2-vl-2b": "GME",
    "gme-qwen2-vl-7b": "GME",
    "rzenembed-v2-7b": "RzenEmbed",
    "ops-mm-embedding-v1-2b": "Ops-MM-embedding",
    "ops-mm-embedding-v1-7b": "Ops-MM-embedding",
    "embed-rl-2b": "Embed-RL",
    "embed-rl-4b": "Embed-RL",
    "vlm2vec-qwen2vl-2b": "VLM2Vec",
    "doubao-seed1.6-embedding": "Doubao seed1.6-embedding",
}


def test_the_papers_eleven_models_have_specs_with_32k_windows_and_sources() -> None:
    models = load_embed_specs(DEFAULT_SPECS).models
    assert {name: models[name].family for name in PAPER_MODELS} == PAPER_MODELS  # type: ignore[union-attr]
    for name in PAPER_MODELS:
        model = models[name]
        assert isinstance(model, VlmEmbedder | ApiEmbedder) and model.sources
        assert model.window == (131072 if isinstance(model, ApiEmbedder) else 32768)
    assert models["gme-qwen2-vl-2b"].loader_window == 1800  # type: ignore[union-attr]
    assert models["qwen3-vl-embedding-8b"].loader_window == 8192  # type: ignore[union-attr]


def test_every_embedder_kind_is_declared_by_an_adapter_module() -> None:
    kinds = set()
    for model in get_args(get_args(EmbedderSpec)[0]):
        kinds |= set(get_args(model.model_fields["kind"].annotation))
    assert kinds == set(adapter_kinds("embed"))


def test_a_frame_without_its_content_slot_is_refused_by_name(tmp_path: Path) -> None:
    shutil.copytree(DEFAULT_SPECS, tmp_path / "specs")
    path = tmp_path / "specs" / "mmlongembed" / "models" / "gme-qwen2-vl-2b.yaml"
    path.write_text(path.read_text().replace("{content}", "{contents}"))
    with pytest.raises(SpecError, match=r"gme-qwen2-vl-2b\.yaml.*template.*\{content\} exactly once"):
        load_embed_specs(tmp_path / "specs")


def test_a_picture_in_no_set_folder_is_named(data: Path) -> None:
    ad = adapter(KINDS[0], data)
    missing = {**image(), "image": "images/absent.png"}
    item = ad.read(candidate([text(HEAD), missing, text(TAIL)]))
    with pytest.raises(RecordError, match=r"picture images/absent\.png is in none of the set folders"):
        ad.embed(item)
