"""The offline Qwen counting tokenizer (the dashscope wheel's qwen.tiktoken built into transformers'
Qwen2Tokenizer) gives tiktoken's ids on the same ranks file and Qwen's pattern, over a corpus of many
scripts, digits, whitespace runs and emoji (after NFC, which Qwen's tokenizer applies and tiktoken does
not), and the ids published for Qwen2/Qwen3 vocabularies; a pinned hash that does not match is refused."""

from __future__ import annotations

import random
import unicodedata
from pathlib import Path

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe

from milebench.benchmarks.mmlongembed.corpus import bundled_sentences
from milebench.benchmarks.mmlongembed.lengths import load_counting_tokenizer
from milebench.benchmarks.mmlongembed.qwen_vocab import QWEN_PATTERN, package_file
from milebench.benchmarks.mmlongembed.spec import load_embed_specs
from milebench.benchmarks.mmlongembed.tokenizer_spec import QwenVocabulary
from milebench.preprocess.tokenizer import HFTokenizer, TokenizerError
from milebench.spec.folder import DEFAULT_SPECS

SPEC = QwenVocabulary(kind="qwen-tiktoken")

# Ids published for Qwen2-family vocabularies: llama.cpp's reference output for a Qwen2.5 vocabulary
# (DeepSeek-R1-Distill-Qwen) and a Qwen3-ASR port's vocab.json / merges.txt test.
PUBLISHED = {
    "Hello world": [9707, 1879],
    "Hello, world! 123": [9707, 11, 1879, 0, 220, 16, 17, 18],
    "What is the capital of France?": [3838, 374, 279, 6722, 315, 9625, 30],
    "   leading spaces": [256, 6388, 12621],
    "new\nline": [931, 198, 1056],
    "café": [924, 58858],
    "你好世界": [108386, 99489],
    "It's a test. It's 'ok'. 100%": [2132, 594, 264, 1273, 13, 1084, 594, 364, 562, 4427, 220, 16, 15, 15, 4],
    "这是上下文。": [100346, 102285, 16744, 1773],
    "Qwen3-ASR: test 123!": [48, 16948, 18, 12, 1911, 49, 25, 1273, 220, 16, 17, 18, 0],
    "system\n": [8948, 198],
}

CORPUS = [
    "The quick brown fox jumps over the lazy dog; DON'T stop, we'll see you're I'M fine.",
    "Ἐν ἀρχῇ ἦν ὁ λόγος, καὶ ὁ λόγος ἦν πρὸς τὸν θεόν.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "مرحبا بالعالم، هذا اختبار للنص العربي.",
    "שלום עולם, זהו מבחן.",
    "यह एक परीक्षण वाक्य है।",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 문장도 토큰화합니다.",
    "中文：长上下文多模态嵌入基准，共计８４６０条查询。",  # noqa: RUF001 (full-width forms on purpose)
    "3.14159 2026-12-02 1,000,000 0x1F600 007 １２３ ٣٤٥ ४५६",  # noqa: RUF001
    "a  b   c    d\t\te\n\n\nf \n g\r\nh   ",
    "    indented code():\n        return {'k': [1, 2, 3]}  # comment\n",
    "trailing spaces     ",
    "\n\n\n\n",
    "emoji 🚀🔥 family 👩‍👩‍👧‍👦 flag 🇫🇷 skin 👍🏽 keycap 1️⃣ text ❤️ and ☃",
    "punctuation!!! ??? ... --- *** ((( ))) «quotes» “curly” ‘single’ — dash",  # noqa: RUF001
    "Ünïcödé ÀÉÎÕÜ façade naïve coöperate Ångström",
    "e\u0301 vs é, A\u030a vs Å, \u1100\u1161 vs 가",
    "<|endoftext|> stays one token; <|im_start|> is text here",
]


def random_texts(seed: int, n: int) -> list[str]:
    """Strings drawn from assorted code-point ranges (scripts, digits, spaces, symbols, emoji)."""
    ranges = [
        *((0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F)),
        *((0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xACFF), (0x1F300, 0x1F6FF), (0x2000, 0x206F)),
    ]
    spaces = [" ", "  ", "\n", "\t", "\r\n", "   \n"]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randrange(1, 30)):
            if rng.random() < 0.25:
                parts.append(rng.choice(spaces))
            else:
                low, high = rng.choice(ranges)
                parts.append("".join(chr(rng.randint(low, high)) for _ in range(rng.randrange(1, 6))))
        out.append("".join(parts))
    return out


@pytest.fixture(scope="module")
def qwen() -> HFTokenizer:
    return load_counting_tokenizer(SPEC)


@pytest.fixture(scope="module")
def reference() -> tiktoken.Encoding:
    ranks = load_tiktoken_bpe(str(package_file(SPEC.package, SPEC.file)))
    return tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens={})


def test_published_qwen_ids(qwen: HFTokenizer) -> None:
    assert qwen.encode(list(PUBLISHED)) == list(PUBLISHED.values())


def test_same_ids_as_tiktoken_on_a_varied_corpus(qwen: HFTokenizer, reference: tiktoken.Encoding) -> None:
    texts = [*CORPUS[:-1], *bundled_sentences()[:200], *random_texts(0, 300)]
    ours = qwen.encode(texts)
    for text, ids in zip(texts, ours, strict=True):
        assert ids == reference.encode_ordinary(unicodedata.normalize("NFC", text)), repr(text)


def test_text_is_nfc_normalised_first(qwen: HFTokenizer, reference: tiktoken.Encoding) -> None:
    decomposed = "cafe\u0301"
    assert qwen.encode([decomposed]) == qwen.encode(["café"]) == [[924, 58858]]
    assert reference.encode_ordinary(decomposed) != [924, 58858]  # tiktoken alone does not normalise


def test_only_endoftext_is_an_added_token(qwen: HFTokenizer) -> None:
    assert qwen.encode(["<|endoftext|>"]) == [[151643]]
    assert len(qwen.encode(["<|im_start|>"])[0]) > 1  # one token (151644) in Qwen3's hub tokenizer


def test_offsets_cut_the_original_string(qwen: HFTokenizer) -> None:
    text = CORPUS[0] + " " + CORPUS[9]
    spans = qwen.offsets(text)
    assert len(spans) == len(qwen.encode([text])[0]) and spans[0][0] == 0 and spans[-1][1] == len(text)


def test_embed_vg_counts_offline_with_the_pinned_vocabulary() -> None:
    ref = load_embed_specs(DEFAULT_SPECS).run("embed-vg").counting_tokenizer
    assert isinstance(ref, QwenVocabulary) and ref.sha256 is not None


def test_a_vocabulary_whose_hash_differs_is_refused() -> None:
    with pytest.raises(TokenizerError, match=r"qwen\.tiktoken: sha256 .* pins 00"):
        load_counting_tokenizer(QwenVocabulary(kind="qwen-tiktoken", sha256="00" * 32))


def test_a_missing_package_or_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="package 'no_such_package' is not installed"):
        load_counting_tokenizer(QwenVocabulary(kind="qwen-tiktoken", package="no_such_package"))
    with pytest.raises(TokenizerError, match=r"has no resources/missing\.tiktoken"):
        load_counting_tokenizer(QwenVocabulary(kind="qwen-tiktoken", file="resources/missing.tiktoken"))
