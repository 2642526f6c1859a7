"""What the three API adapters share: key and URL from the environment, image parts, concurrent calls.

A provider module says only how to address the model, how to write one sample as a request (text and
image parts in prompt order) and how to read the answer and its token counts.
"""

from __future__ import annotations

import base64
import io
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from PIL import Image

from milebench.infer.adapter import AdapterError, InferenceError, SampleFailure, TokenUsage
from milebench.infer.api.client import ApiClient
from milebench.infer.images import reading_image
from milebench.paths import RunPaths
from milebench.records import IMAGE_PLACEHOLDER, FailureKind, PreparedSample
from milebench.spec.model import ApiModel, ModelSpec

MIME_BY_FORMAT = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}
"""Formats every provider accepts as is; anything else is re-encoded as PNG."""


@dataclass(frozen=True)
class ImagePart:
    mime: str
    data: str
    """Base64 of the file bytes."""


Part = str | ImagePart
"""A prompt piece: text, or one image."""


def encode_image(path: Path) -> ImagePart:
    raw = path.read_bytes()
    with Image.open(io.BytesIO(raw)) as img:
        mime = MIME_BY_FORMAT.get(img.format or "")
        if mime is None:
            buffer = io.BytesIO()
            img.convert("RGB").save(buffer, format="PNG")
            raw, mime = buffer.getvalue(), "image/png"
    return ImagePart(mime, base64.b64encode(raw).decode("ascii"))


def prompt_parts(sample: PreparedSample, data_root: Path) -> list[Part]:
    """Text and images in prompt order: each placeholder takes the next image; empty text is dropped."""
    pieces = sample.prompt.split(IMAGE_PLACEHOLDER)
    if len(pieces) - 1 != len(sample.images):
        raise AdapterError(
            f"task {sample.task}, sample {sample.sample_id}: {len(pieces) - 1} image placeholders "
            f"for {len(sample.images)} images"
        )
    parts: list[Part] = []
    for i, piece in enumerate(pieces):
        if i:
            with reading_image(sample, sample.images[i - 1]):
                parts.append(encode_image(data_root / sample.images[i - 1]))
        if piece:
            parts.append(piece)
    return parts


class ApiAdapter(ABC):
    """Answers a batch with up to ``limits.concurrency`` requests in flight, one request per sample."""

    provider: ClassVar[str]
    key_env: ClassVar[str]
    url_env: ClassVar[str]
    """Both are in the module's declared ``environment`` (with ``proxies: true``): containers get exactly
    the declared variables."""
    default_url: ClassVar[str]
    version = "1"

    def __init__(self, spec: ModelSpec, paths: RunPaths, data_root: Path) -> None:
        weights = spec.weights
        if not isinstance(weights, ApiModel) or weights.provider != self.provider:
            raise AdapterError(
                f"model spec {spec.name!r}: weights must be kind api, provider {self.provider}"
            )
        key = os.environ.get(self.key_env, "")
        if not key:
            raise AdapterError(f"model spec {spec.name!r}: set {self.key_env} in the environment")
        self.spec = spec
        self.weights = weights
        self.data_root = data_root
        self.key = key
        self.base_url = (os.environ.get(self.url_env) or weights.base_url or self.default_url).rstrip("/")
        self.client = ApiClient(weights.limits, key)
        self._usage: list[TokenUsage] = []

    @abstractmethod
    def url(self) -> str:
        """The endpoint that answers one request."""

    @abstractmethod
    def headers(self) -> dict[str, str]:
        """Authentication (the key) and protocol headers."""

    @abstractmethod
    def body(self, parts: list[Part]) -> dict[str, Any]:
        """The request for one sample: its parts in order as one user turn, greedy decoding."""

    @abstractmethod
    def read(self, body: Any) -> tuple[str, int | None, int | None]:
        """Answer text, input tokens and output tokens; raises AttributeError, KeyError, TypeError,
        ValueError or ``InferenceError`` on an answer without text."""

    @abstractmethod
    def overflow(self, status: int, message: str) -> bool:
        """Whether an error answer says the input exceeds the model's context (never retried)."""

    def answer(self, sample: PreparedSample) -> tuple[str | SampleFailure, TokenUsage]:
        """One sample's answer, or its failure with a redacted detail. An answer holding the key (a
        provider or proxy echoing the request) is a failure, and its text is never kept."""
        start = time.perf_counter()
        redactor = self.client.redactor
        try:
            body = self.client.post(
                self.url(), self.headers(), self.body(prompt_parts(sample, self.data_root)), self.overflow
            )
            try:
                text, n_in, n_out = self.read(body)
            except (AttributeError, KeyError, IndexError, TypeError, ValueError) as err:
                raise InferenceError(FailureKind.API_ERROR, f"unexpected answer format: {err!r}") from None
            if redactor.found(text):
                raise InferenceError(
                    FailureKind.API_ERROR, "the answer holds the API key (an echo of the request?); not kept"
                )
        except InferenceError as err:
            return SampleFailure(err.kind, redactor.redact(str(err))), TokenUsage(
                None, None, time.perf_counter() - start
            )
        return text.strip(), TokenUsage(n_in, n_out, time.perf_counter() - start)

    def generate(self, samples: Sequence[PreparedSample]) -> list[str | SampleFailure]:
        workers = min(self.weights.limits.concurrency, len(samples)) or 1
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=self.spec.name) as pool:
            results = list(pool.map(self.answer, samples))
        self._usage = [usage for _, usage in results]
        return [answer for answer, _ in results]

    def last_usage(self) -> list[TokenUsage]:
        return list(self._usage)
