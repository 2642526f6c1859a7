"""Embedding adapters: what a model reads of a candidate, and its similarity to each query of a pool.

The two text adapters here read text only: a candidate's images are dropped and its text segments
joined with spaces (the multimodal ones, which read images in document order, are ``vlm`` and
``doubao``). A sentence-transformers model then reads at most its window, cut in the middle at segment
level (head and tail kept); cosine similarity of L2-normalised embeddings ranks a pool. BM25 (bm25s)
reads the whole text; each pool is its own index, so IDF is over the pool. A candidate without text (an
image-only one) scores 0, as no query term occurs in it; so does every candidate of a pool without text.

``ADAPTER`` declares both (milebench.spec.adapters): a model spec's ``kind`` picks its adapter, whichever
module declares it.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from milebench.benchmarks.mmlongembed.cache import cached_embeddings, model_key
from milebench.benchmarks.mmlongembed.lengths import (
    Piece,
    load_counting_tokenizer,
    middle_truncate,
    package_model_path,
)
from milebench.benchmarks.mmlongembed.records import Candidate, Pool, Query, TextSegment
from milebench.benchmarks.mmlongembed.spec import AnyEmbedder, Bm25Model, SentenceTransformersModel
from milebench.benchmarks.mmlongembed.tokenizer_spec import PackageTokenizer
from milebench.errors import KitError
from milebench.preprocess.tokenizer import HFTokenizer
from milebench.record_files import RecordError
from milebench.spec.adapters import adapter_kinds, declared

ADAPTER = [
    {"kind": "sentence-transformers", "does": "embed", "entry": "SentenceTransformerAdapter"},
    {"kind": "bm25", "does": "embed", "entry": "Bm25Adapter"},
]
"""What this module runs (milebench.spec.adapters)."""

log = logging.getLogger(__name__)

Scores = dict[str, dict[str, float]]


@dataclass(frozen=True)
class ModelInput:
    """What a model read of one candidate."""

    text: str
    length: int | None
    """Realised length in the model's own tokens (null for a model without a window)."""
    needle: str
    """``whole``, ``part`` or ``dropped``: what of the needle reached the model."""
    images: tuple[str, ...] = ()
    """The pictures the text's image placeholders stand for, in order (relative to their set folder)."""


class Adapter(Protocol):
    def read(self, candidate: Candidate) -> ModelInput: ...

    def score(
        self, queries: Sequence[Query], pools: Mapping[str, Pool], inputs: Mapping[str, ModelInput]
    ) -> Scores: ...


def picture(sets: Sequence[Path], name: str) -> Path:
    """Where a candidate's picture is: pictures are named by content hash (``images/<sha256>.<ext>``), so
    the same name in any set folder is the same bytes; the first folder holding it is taken."""
    for folder in sets:
        if (folder / name).is_file():
            return folder / name
    raise RecordError(f"picture {name} is in none of the set folders {', '.join(map(str, sets))}")


def text_pieces(candidate: Candidate) -> tuple[list[Piece], int | None]:
    """The candidate's text segments (images dropped) and the needle's index among them (None: an image)."""
    pieces: list[Piece] = []
    needle: int | None = None
    for i, segment in enumerate(candidate.segments):
        if isinstance(segment, TextSegment):
            if i == candidate.needle_segment:
                needle = len(pieces)
            pieces.append(Piece(tokens=segment.tokens, text=segment.text))
    return pieces, needle


class SentenceTransformerAdapter:
    def __init__(
        self, spec: SentenceTransformersModel, cache: Path, threads: int | None, sets: Sequence[Path]
    ) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        if threads:
            torch.set_num_threads(threads)
        weights = spec.weights
        source = (
            str(package_model_path(weights.package))
            if isinstance(weights, PackageTokenizer)
            else weights.repo
        )
        revision = None if isinstance(weights, PackageTokenizer) else weights.revision
        self.model = SentenceTransformer(source, device="cpu", revision=revision)
        self.model.max_seq_length = spec.window
        self.tokenizer: HFTokenizer = load_counting_tokenizer(weights)
        self.budget = spec.window - self.model.tokenizer.num_special_tokens_to_add()
        self.spec, self.cache = spec, cache

    def read(self, candidate: Candidate) -> ModelInput:
        pieces, needle = text_pieces(candidate)
        recounted = [
            Piece(tokens=len(ids), text=p.text)
            for p, ids in zip(pieces, self.tokenizer.encode([p.text or "" for p in pieces]), strict=True)
        ]
        kept = middle_truncate(self.tokenizer, recounted, self.budget)
        text = " ".join(p.text or "" for _, p in kept.kept)
        return ModelInput(
            text=text, length=kept.length, needle="dropped" if needle is None else kept.state(needle)
        )

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(
            texts, batch_size=self.spec.batch_size, normalize_embeddings=True, show_progress_bar=False
        )

    def score(
        self, queries: Sequence[Query], pools: Mapping[str, Pool], inputs: Mapping[str, ModelInput]
    ) -> Scores:
        texts = [q.text for q in queries] + [i.text for i in inputs.values()]
        vectors = cached_embeddings(
            self.cache, model_key(self.spec), texts, self._encode, self.spec.batch_size
        )
        return {
            q.id: {cid: float(vectors[q.text] @ vectors[inputs[cid].text]) for cid in pools[q.id].candidates}
            for q in queries
        }


class Bm25Adapter:
    def __init__(self, spec: Bm25Model, cache: Path, threads: int | None, sets: Sequence[Path]) -> None:
        self.spec = spec

    def read(self, candidate: Candidate) -> ModelInput:
        pieces, needle = text_pieces(candidate)
        return ModelInput(
            text=" ".join(p.text or "" for p in pieces),
            length=None,
            needle="dropped" if needle is None else "whole",
        )

    def score(
        self, queries: Sequence[Query], pools: Mapping[str, Pool], inputs: Mapping[str, ModelInput]
    ) -> Scores:
        import bm25s

        indexes: dict[tuple[str, ...], bm25s.BM25 | None] = {}
        out: Scores = {}
        for query in queries:
            ids = pools[query.id].candidates
            if ids not in indexes:
                corpus = bm25s.tokenize([inputs[c].text for c in ids], stopwords="en", show_progress=False)
                index = None
                if (
                    corpus.vocab
                ):  # a pool without a single term (image-only candidates): bm25s cannot index it
                    index = bm25s.BM25(k1=self.spec.k1, b=self.spec.b, method=self.spec.method)
                    index.index(corpus, show_progress=False)
                indexes[ids] = index
            index = indexes[ids]
            tokens = bm25s.tokenize([query.text], stopwords="en", return_ids=False, show_progress=False)[0]
            scores = index.get_scores(tokens) if tokens and index is not None else [0.0] * len(ids)
            out[query.id] = {cid: float(s) for cid, s in zip(ids, scores, strict=True)}
        return out


def load_adapter(spec: AnyEmbedder, cache: Path, threads: int | None, sets: Sequence[Path]) -> Adapter:
    """The adapter its module declares for the spec's ``kind`` (imported only now); ``sets`` are the set
    folders candidates' pictures are named relative to (``picture``)."""
    found = declared(spec.kind)
    if found is None or found.declaration.does != "embed":
        known = ", ".join(adapter_kinds("embed"))
        raise KitError(
            f"embedder {spec.name!r}: no module declares embedding adapter {spec.kind!r} (known: {known})"
        )
    module, entry = found.target.split(":")
    adapter: Adapter = getattr(importlib.import_module(module), entry)(spec, cache, threads, sets)
    return adapter
