"""Truncation to a model's context: the official walk, paper vs clean text, and the per-sample record."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from milebench.benchmarks.milebench.preprocess.truncate import Budget, fit_context
from milebench.benchmarks.milebench.spec.run import TruncationMode
from milebench.infer.records import IMAGE_PLACEHOLDER as PH
from milebench.infer.tiny import build_tokenizer
from milebench.preprocess.tokenizer import HFTokenizer

PAPER, CLEAN = TruncationMode.PAPER, TruncationMode.CLEAN
INSTRUCTION = "Answer the question"  # three words: three tokens with the word tokenizer
IMAGES = ("a.jpg", "b.jpg", "c.jpg")


def word_tokenizer(corpus: list[str]) -> HFTokenizer:
    """One token per word or punctuation run; its decode joins tokens with single spaces."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    return HFTokenizer(PreTrainedTokenizerFast(tokenizer_object=tokenizer), "words")


CORPUS = [INSTRUCTION, "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 first second , end . Question : which one ?"]
WORDS = word_tokenizer(CORPUS)


def budget(max_len: int, per_image: int = 2, mode: TruncationMode = PAPER) -> Budget:
    return Budget(max_context_len=max_len, n_tokens_per_image=per_image, tokenizer=WORDS, mode=mode)


def test_word_tokenizer_counts_words() -> None:
    assert [len(ids) for ids in WORDS.encode([INSTRUCTION, "w0  w1,", ""])] == [3, 3, 0]


def test_no_truncation_needed_keeps_everything() -> None:
    context = f"{PH}first {PH}second {PH}Question : which one ?"
    for mode in (PAPER, CLEAN):
        fitted = fit_context(INSTRUCTION, context, IMAGES, budget(100, 2, mode), pair_images=True)
        assert fitted.images == IMAGES
        assert fitted.context.count(PH) == 3
        r = fitted.record
        assert (r.mode, r.images_kept, r.images_dropped_budget, r.pieces_kept, r.pieces_total) == (
            mode,
            3,
            0,
            4,
            4,
        )
        assert (r.instruction_tokens, r.text_tokens_total, r.text_tokens_kept) == (3, 7, 7)
        assert r.image_tokens_kept == 6 and not r.truncated and r.text_tokens_dropped == 0
    clean = fit_context(INSTRUCTION, context, IMAGES, budget(100, 2, CLEAN), pair_images=True)
    assert clean.context == context


def test_last_piece_alone_too_long_keeps_its_last_tokens() -> None:
    context = f"{PH}w0 w1 w2 w3 w4  w5 w6"
    clean = fit_context(INSTRUCTION, context, IMAGES[:1], budget(3 + 4, 2, CLEAN), pair_images=True)
    assert clean.context == "w3 w4  w5 w6"  # exact text from the first kept token's offset
    assert clean.images == ()
    r = clean.record
    assert r.piece_cut and r.pieces_kept == 1 and r.images_dropped_budget == 1
    assert (r.text_tokens_total, r.text_tokens_kept, r.text_tokens_dropped) == (7, 4, 3)
    paper = fit_context(INSTRUCTION, context, IMAGES[:1], budget(3 + 4, 2, PAPER), pair_images=True)
    assert paper.context == "w3 w4 w5 w6"  # decoded: the double space is gone
    assert paper.record.pieces_changed == 1


def test_images_dropped_from_the_left() -> None:
    context = f"{PH}w0 w1 {PH}w2 w3 {PH}Question : which one ?"
    # instruction 3 + last piece 5 + image 2 + piece 2 + image 2 = 14; the next piece (2) does not fit.
    fitted = fit_context(INSTRUCTION, context, IMAGES, budget(3 + 5 + 2 + 2 + 2 + 1, 2, CLEAN), True)
    assert fitted.images == ("b.jpg", "c.jpg")
    assert fitted.context == f"{PH}w2 w3 {PH}Question : which one ?"
    r = fitted.record
    assert (r.images_kept, r.images_dropped_budget, r.pieces_kept, r.pieces_total) == (2, 1, 2, 4)
    assert (r.text_tokens_kept, r.image_tokens_kept) == (7, 4) and r.truncated and not r.piece_cut


def test_image_budget_stops_the_walk_before_the_text() -> None:
    context = f"{PH}w0 {PH}Question : which one ?"
    # after the last piece (5) an image (4) does not fit: stop, dropping the earlier text too.
    fitted = fit_context(INSTRUCTION, context, IMAGES[:2], budget(3 + 5 + 3, 4, CLEAN), True)
    assert fitted.context == "Question : which one ?"
    assert fitted.images == ()
    assert fitted.record.images_dropped_budget == 2 and fitted.record.pieces_kept == 1


def test_image_only_context() -> None:
    context = PH * 3
    some = fit_context(INSTRUCTION, context, IMAGES, budget(3 + 2 * 2, 2, CLEAN), pair_images=True)
    assert (some.context, some.images) == (PH * 2, ("b.jpg", "c.jpg"))
    assert some.record.text_tokens_total == 0 and some.record.images_dropped_budget == 1
    every = fit_context(INSTRUCTION, context, IMAGES, budget(3 + 3 * 2, 2, PAPER), pair_images=True)
    assert (every.context, every.images) == (PH * 3, IMAGES)
    assert not every.record.truncated


def test_paper_and_clean_differ_only_in_text() -> None:
    context = f"{PH}first ,  second {PH}w1 w2 , end ."
    paper = fit_context(INSTRUCTION, context, IMAGES[:2], budget(100, 2, PAPER), pair_images=True)
    clean = fit_context(INSTRUCTION, context, IMAGES[:2], budget(100, 2, CLEAN), pair_images=True)
    assert clean.context == context
    assert paper.context == f"{PH}first , second{PH}w1 w2 , end ."  # decoded: spaces lost
    assert paper.images == clean.images == IMAGES[:2]
    assert paper.record.pieces_changed == 1 and clean.record.pieces_changed == 0
    assert paper.record.model_copy(update={"mode": CLEAN, "pieces_changed": 0}) == clean.record


def test_budget_used_up_by_the_instruction() -> None:
    """Official quirk: with no room left, ``ids[-0:]`` keeps the whole last piece in paper mode."""
    context = f"{PH}w0 w1 w2"
    paper = fit_context(INSTRUCTION, context, IMAGES[:1], budget(3, 2, PAPER), pair_images=True)
    clean = fit_context(INSTRUCTION, context, IMAGES[:1], budget(3, 2, CLEAN), pair_images=True)
    assert paper.context == "w0 w1 w2" and paper.record.text_tokens_kept == 3
    assert not paper.record.piece_cut  # every token of the piece is kept: nothing was cut
    assert clean.context == "" and clean.record.text_tokens_kept == 0 and clean.record.piece_cut


def test_combined_mode_counts_no_image_tokens() -> None:
    context = "<Image 1> w0 w1 <Image 2> Question : which one ?"
    pictures = ("tiles-1.jpg", "tiles-2.jpg")
    fitted = fit_context(INSTRUCTION, context, pictures, budget(3 + 5, 500, CLEAN), pair_images=False)
    assert fitted.images == pictures  # every picture is read, whatever the text budget
    assert fitted.context == "Question : which one ?"
    r = fitted.record
    assert r.image_tokens_kept == 0 and r.n_tokens_per_image == 0
    assert (r.images_total, r.images_kept, r.images_dropped_budget, r.images_unpaired) == (2, 2, 0, 0)


def test_unlimited_pairs_like_the_official_walk() -> None:
    fitted = fit_context(INSTRUCTION, f"x{PH}y", IMAGES, None, pair_images=True)
    assert (fitted.context, fitted.images) == (f"{PH}x{PH}y", ("b.jpg", "c.jpg"))
    r = fitted.record
    assert r.mode is None and r.instruction_tokens is None
    assert (r.images_kept, r.images_unpaired, r.images_dropped_budget) == (2, 1, 0)
    # Without a budget nothing is counted: the token fields are unknown, not zero.
    assert (r.max_context_len, r.n_tokens_per_image, r.text_tokens_total, r.text_tokens_kept) == (None,) * 4
    assert r.image_tokens_kept is None


@pytest.mark.parametrize("mode", [PAPER, CLEAN])
def test_byte_level_tokenizer_round_trip_is_exact(mode: TruncationMode) -> None:
    """The tiny LLaVA's byte-level BPE decodes back unchanged, so both modes give the same prompt."""
    tiny = HFTokenizer(build_tokenizer(), "tiny-llava")
    context = f"{PH}Look at  the picture.\n{PH}Which object? Choice list: \nA. cup\nYour answer is: "
    full = fit_context(INSTRUCTION, context, IMAGES[:2], Budget(10_000, 16, tiny, mode), True)
    assert full.context == context and full.record.pieces_changed == 0
    n_last = len(tiny.encode([context.split(PH)[-1]])[0])
    n_instr = len(tiny.encode([INSTRUCTION])[0])
    tight = fit_context(INSTRUCTION, context, IMAGES[:2], Budget(n_instr + n_last - 3, 16, tiny, mode), True)
    assert context.endswith(tight.context) and tight.record.piece_cut
    assert tight.record.text_tokens_kept == n_last - 3
