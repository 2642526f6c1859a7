"""Doubao seed1.6-embedding through Volcengine Ark's multimodal embedding endpoint.

Request shape (Ark's public API reference for ``POST /api/v3/embeddings/multimodal``, doubao-embedding-vision
models): ``{"model": <id>, "input": [{"type": "text", "text": ...} | {"type": "image_url", "image_url":
{"url": "data:<mime>;base64,..."}}], "encoding_format": "float"}`` with ``Authorization: Bearer <key>``;
the answer holds one vector for the whole input as ``data.embedding`` (a list ``data[0].embedding`` in
older answers; both are read). One request per query or candidate, its parts in document order; an
instruction, when the spec states one, is a leading text part (the service's own instruction format is
not published). Candidates longer than the window are cut in the middle by the paper's counting rule
before sending. Key and URL come from ``ARK_API_KEY`` and ``ARK_BASE_URL``; retries, rate limit,
deadlines and key redaction are MileBench's API client's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from milebench.benchmarks.mmlongembed.cache import cached_embeddings
from milebench.benchmarks.mmlongembed.embedders import ModelInput, Scores, picture
from milebench.benchmarks.mmlongembed.lengths import Piece, load_counting_tokenizer, middle_truncate
from milebench.benchmarks.mmlongembed.records import Candidate, Pool, Query, TextSegment
from milebench.benchmarks.mmlongembed.spec import ApiEmbedder
from milebench.benchmarks.mmlongembed.vlm import key
from milebench.infer.adapter import AdapterError, InferenceError
from milebench.infer.api.base import encode_image
from milebench.infer.api.client import ApiClient
from milebench.io import canonical_json
from milebench.spec.registry import spec_hash

ADAPTER = {
    "kind": "ark-multimodal-embed",
    "does": "embed",
    "entry": "ArkEmbedAdapter",
    "environment": ["ARK_API_KEY", "ARK_BASE_URL"],
    "proxies": True,
}
"""What this module runs (milebench.spec.adapters)."""

KEY_ENV = "ARK_API_KEY"
URL_ENV = "ARK_BASE_URL"
DEFAULT_URL = "https://ark.cn-beijing.volces.com/api/v3"
TEXT, IMAGE = "text", "image"


class ArkEmbedAdapter:
    def __init__(self, spec: ApiEmbedder, cache: Path, threads: int | None, sets: Sequence[Path]) -> None:
        secret = os.environ.get(KEY_ENV, "")
        if not secret:
            raise AdapterError(f"embedder {spec.name!r}: set {KEY_ENV} in the environment")
        base = os.environ.get(URL_ENV) or spec.base_url or DEFAULT_URL
        self.url = f"{base.rstrip('/')}/embeddings/multimodal"
        self.headers = {"Authorization": f"Bearer {secret}"}
        self.client = ApiClient(spec.limits, secret)
        self.tokenizer = load_counting_tokenizer(spec.tokenizer)
        self.spec, self.cache, self.sets = spec, cache, sets

    def read(self, candidate: Candidate) -> ModelInput:
        pieces = [
            Piece(tokens=s.tokens, text=s.text)
            if isinstance(s, TextSegment)
            else Piece(s.tokens, image=s.image)
            for s in candidate.segments
        ]
        budget = self.spec.window - sum(
            len(i) for i in self.tokenizer.encode([self.spec.document_instruction])
        )
        kept = middle_truncate(self.tokenizer, pieces, budget)
        chosen = [p for _, p in kept.kept]
        ordered = [[TEXT, p.text or ""] if p.image is None else [IMAGE, p.image] for p in chosen]
        return ModelInput(
            text=canonical_json(ordered),
            length=kept.length,
            needle=kept.state(candidate.needle_segment),
            images=tuple(p.image for p in chosen if p.image is not None),
        )

    @staticmethod
    def pieces(item: ModelInput) -> list[tuple[str, str]]:
        """A candidate's kept pieces in order, as ``read`` wrote them: (text|image, text or image path)."""
        return [(kind, value) for kind, value in json.loads(item.text)]

    def parts(self, instruction: str, pieces: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """The request's ``input``: the instruction, then text and image parts in document order."""
        out: list[dict[str, Any]] = [{"type": "text", "text": instruction}] if instruction else []
        for kind, value in pieces:
            if kind == TEXT:
                out.append({"type": "text", "text": value})
            else:
                image = encode_image(picture(self.sets, value))
                out.append(
                    {"type": "image_url", "image_url": {"url": f"data:{image.mime};base64,{image.data}"}}
                )
        return out

    def embed(self, name: str, parts: list[dict[str, Any]]) -> np.ndarray:
        body = {"model": self.spec.model_id, "input": parts, "encoding_format": "float"}
        try:
            answer = self.client.post(self.url, self.headers, body, lambda status, message: False)
            data = answer["data"]
            vector = np.asarray((data[0] if isinstance(data, list) else data)["embedding"], dtype=np.float32)
        except InferenceError as err:
            raise AdapterError(f"embedder {self.spec.name!r}, {name}: {err}") from None
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise AdapterError(
                f"embedder {self.spec.name!r}, {name}: unexpected answer format: {err!r}"
            ) from None
        norm = float(np.linalg.norm(vector))
        if vector.ndim != 1 or not norm:
            raise AdapterError(f"embedder {self.spec.name!r}, {name}: the answer holds no usable vector")
        return vector / norm

    def score(
        self, queries: Sequence[Query], pools: Mapping[str, Pool], inputs: Mapping[str, ModelInput]
    ) -> Scores:
        requests: dict[str, tuple[str, list[tuple[str, str]], str]] = {}
        for query in queries:
            item = ModelInput(text=query.text, length=None, needle="")
            requests[key(item)] = (f"query {query.id}", [(TEXT, query.text)], self.spec.query_instruction)
        for cid, item in inputs.items():
            pieces = self.pieces(item)
            requests.setdefault(key(item), (f"candidate {cid}", pieces, self.spec.document_instruction))

        def encode(keys: list[str]) -> np.ndarray:
            with ThreadPoolExecutor(max_workers=self.spec.limits.concurrency) as pool:
                return np.stack(
                    list(
                        pool.map(
                            lambda k: self.embed(requests[k][0], self.parts(requests[k][2], requests[k][1])),
                            keys,
                        )
                    )
                )

        vectors = cached_embeddings(
            self.cache, spec_hash(self.spec), list(requests), encode, 4 * self.spec.limits.concurrency
        )
        query_vector = {q.id: vectors[key(ModelInput(text=q.text, length=None, needle=""))] for q in queries}
        return {
            q.id: {
                cid: float(query_vector[q.id] @ vectors[key(inputs[cid])]) for cid in pools[q.id].candidates
            }
            for q in queries
        }
