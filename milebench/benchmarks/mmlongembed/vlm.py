"""Qwen2-VL / Qwen3-VL embedding models: GME, Qwen3-VL-Embedding, VLM2Vec, Ops-MM-embedding, RzenEmbed,
Embed-RL. The families differ only in their prompt frame, instructions and image bounds, which their
specs state; the backbone (``kind``) decides the model class ``from_pretrained`` builds.

A candidate is read as its segments in document order: text, and one image placeholder per picture.
The kit cuts it to the window BEFORE any processor sees it (the families' own loaders truncate ids
from the end and can split an image's tokens): every text segment is recounted with the model's
tokenizer and every image costs what the model's image processor will make of it, then the middle is
dropped, head and tail kept, an image kept whole or not at all (``lengths.middle_truncate``). The frame
and instruction are charged first; if joining pieces tokenizes longer than their sum, the budget
shrinks by the excess and the cut is redone, so the final input never exceeds the window.

The embedding is the last layer's hidden state at the last token (each frame ends on the token its
family pools: attention is causal, so a frame cut right after Embed-RL's ``<emb>`` gives the hidden
state its own code reads there), L2-normalised; similarity is the dot product (cosine). One input per
forward pass, so no padding is involved.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from milebench.benchmarks.mmlongembed.cache import cached_embeddings
from milebench.benchmarks.mmlongembed.embedders import ModelInput, Scores, picture
from milebench.benchmarks.mmlongembed.lengths import Piece, middle_truncate
from milebench.benchmarks.mmlongembed.records import Candidate, Pool, Query, TextSegment
from milebench.benchmarks.mmlongembed.spec import CONTENT, INSTRUCTION, TinyEmbedWeights, VlmEmbedder
from milebench.io import canonical_json
from milebench.preprocess.tokenizer import HFTokenizer
from milebench.record_files import RecordError
from milebench.spec.adapters import declared
from milebench.spec.registry import spec_hash

ADAPTER = [
    {
        "kind": "hf-qwen2-vl-embed",
        "does": "embed",
        "entry": "VlmEmbedAdapter",
        "tiny": {
            "family": "qwen2-vl-embed",
            "builder": "milebench.benchmarks.mmlongembed.tiny_vl:build_tiny_vl_embedder",
        },
    },
    {
        "kind": "hf-qwen3-vl-embed",
        "does": "embed",
        "entry": "VlmEmbedAdapter",
        "tiny": {
            "family": "qwen3-vl-embed",
            "builder": "milebench.benchmarks.mmlongembed.tiny_vl:build_tiny_vl_embedder",
        },
    },
]
"""What this module runs (milebench.spec.adapters)."""

log = logging.getLogger(__name__)

JOURNAL_BATCH = 8
"""Inputs encoded between two appends to the embedding journal."""


@contextlib.contextmanager
def checkpoint(spec: VlmEmbedder) -> Iterator[tuple[str, str | None]]:
    """Where ``from_pretrained`` loads from: the hub repo, or the tiny model built for the occasion."""
    weights = spec.weights
    if not isinstance(weights, TinyEmbedWeights):
        yield weights.repo, weights.revision
        return
    found = declared(spec.kind)
    if found is None or found.declaration.tiny is None:
        raise RecordError(f"embedder {spec.name!r}: no module declares a tiny {spec.kind!r}")
    module, function = found.declaration.tiny.builder.split(":")
    with tempfile.TemporaryDirectory(prefix="tiny-embedder-") as folder:
        getattr(importlib.import_module(module), function)(spec, Path(folder))
        yield folder, None


class VlmEmbedAdapter:
    def __init__(self, spec: VlmEmbedder, cache: Path, threads: int | None, sets: Sequence[Path]) -> None:
        import torch
        import transformers
        from transformers import AutoImageProcessor, AutoTokenizer

        from milebench.infer.hf_image_text_to_text import DTYPE_ARGUMENT, PIL_IMAGE_PROCESSOR
        from milebench.infer.hf_qwen2_vl import Qwen2VLInputs

        if threads:
            torch.set_num_threads(threads)
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        dtype = getattr(torch, spec.dtype) if self.device.type == "cuda" else torch.float32
        with checkpoint(spec) as (source, revision):
            tokenizer = AutoTokenizer.from_pretrained(source, revision=revision)
            image_processor = AutoImageProcessor.from_pretrained(
                source, revision=revision, **PIL_IMAGE_PROCESSOR
            )
            model = transformers.AutoModelForImageTextToText.from_pretrained(
                source, revision=revision, **{DTYPE_ARGUMENT: dtype}
            )
        if tokenizer.add_tokens(list(spec.added_tokens)):
            model.resize_token_embeddings(len(tokenizer))
        # transformers wraps PreTrainedModel.to with functools.wraps, which types it as unbound
        self.model = model.to(self.device).eval()  # type: ignore[arg-type]
        self.inputs = Qwen2VLInputs(tokenizer, image_processor, spec.max_image_tokens, spec.min_image_tokens)
        self.tokenizer = HFTokenizer(tokenizer, source)
        self.markers = len(self.tokenizer.encode([spec.image_placeholder])[0]) - 1
        """Tokens of the placeholder besides its image pad (vision start and end)."""
        self.spec, self.cache, self.sets = spec, cache, sets

    def image_tokens(self, width: int, height: int) -> int:
        """Image pads the model's image processor makes of a picture of this size (bounds of the spec);
        the picture costs ``markers`` more."""
        processor = self.inputs.image_processor
        bounds = {
            "min_pixels": self.inputs.size["shortest_edge"],
            "max_pixels": self.inputs.size["longest_edge"],
        }
        patches: int = processor.get_number_of_image_patches(height, width, bounds)
        return patches // self.inputs.merge**2

    def frame(self, instruction: str, content: str) -> str:
        return self.spec.template.replace(INSTRUCTION, instruction).replace(CONTENT, content)

    def content(self, pieces: Sequence[Piece]) -> str:
        """Text and image placeholders in order; two adjacent text pieces joined by the separator."""
        out: list[str] = []
        for i, piece in enumerate(pieces):
            if piece.image is not None:
                out.append(self.spec.image_placeholder)
                continue
            if i and pieces[i - 1].image is None:
                out.append(self.spec.separator)
            out.append(piece.text or "")
        return "".join(out)

    def length(self, text: str, images: Sequence[Piece]) -> int:
        """Ids the model gets: the text's, each image pad expanded to its image's pads."""
        return len(self.tokenizer.encode([text])[0]) + sum(p.tokens - self.markers - 1 for p in images)

    def pieces(self, candidate: Candidate) -> list[Piece]:
        texts = [s.text for s in candidate.segments if isinstance(s, TextSegment)]
        counts = iter(len(ids) for ids in self.tokenizer.encode(texts))
        return [
            Piece(tokens=next(counts), text=s.text)
            if isinstance(s, TextSegment)
            else Piece(tokens=self.image_tokens(s.width, s.height) + self.markers, image=s.image)
            for s in candidate.segments
        ]

    def read(self, candidate: Candidate) -> ModelInput:
        pieces = self.pieces(candidate)
        instruction = self.spec.document_instruction
        budget = self.spec.window - self.length(self.frame(instruction, ""), [])
        while True:
            kept = middle_truncate(self.tokenizer, pieces, max(budget, 0))
            chosen = [p for _, p in kept.kept]
            text = self.frame(instruction, self.content(chosen))
            images = [p for p in chosen if p.image is not None]
            over = self.length(text, images) - self.spec.window
            if over <= 0 or budget <= 0:
                break
            budget -= over
        return ModelInput(
            text=text,
            length=kept.length,
            needle=kept.state(candidate.needle_segment),
            images=tuple(p.image or "" for p in images),
        )

    def load_images(self, item: ModelInput) -> list[Any]:
        from PIL import Image

        loaded = []
        for name in item.images:
            path = picture(self.sets, name)
            try:
                with Image.open(path) as img:
                    loaded.append(img.convert("RGB"))
            except OSError as err:
                raise RecordError(f"{path}: cannot read the image ({err})") from None
        return loaded

    def embed(self, item: ModelInput) -> np.ndarray:
        """Last token's final hidden state, L2-normalised."""
        import torch

        images = self.load_images(item)
        batch = self.inputs([item.text], images or None, return_tensors="pt").to(self.device)
        with torch.inference_mode():
            hidden = self.model.model(**batch).last_hidden_state[0, -1].float()
        return torch.nn.functional.normalize(hidden, dim=-1).cpu().numpy()

    def score(
        self, queries: Sequence[Query], pools: Mapping[str, Pool], inputs: Mapping[str, ModelInput]
    ) -> Scores:
        framed = {
            q.id: ModelInput(text=self.frame(self.spec.query_instruction, q.text), length=None, needle="")
            for q in queries
        }
        keyed = {key(i): i for i in [*framed.values(), *inputs.values()]}
        vectors = cached_embeddings(
            self.cache,
            spec_hash(self.spec),
            list(keyed),
            lambda keys: np.stack([self.embed(keyed[k]) for k in keys]),
            JOURNAL_BATCH,
        )
        return {
            q.id: {
                cid: float(vectors[key(framed[q.id])] @ vectors[key(inputs[cid])])
                for cid in pools[q.id].candidates
            }
            for q in queries
        }


def key(item: ModelInput) -> str:
    """What identifies an input in the embedding journal: its text and its images (content-named)."""
    return canonical_json({"text": item.text, "images": list(item.images)})
