"""What the three API adapters share: key and URL from the environment, image parts, concurrent calls.

A provider module says only how to address the model, how to write one sample as a request (text and
image parts in prompt order) and how to read the answer and its token counts. A spec marked ``keyless``
(a local server) reads and sends no key. Before a job answers anything, one request checks that the
endpoint can be reached at all (``preflight``): a refused connection or an unknown host fails the job at
once instead of every sample retrying it.
"""

from __future__ import annotations

import base64
import io
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import requests
from PIL import Image

from milebench.http_deadline import Deadline
from milebench.infer.adapter import FIRST_FAILURES, AdapterError, InferenceError, SampleFailure, TokenUsage
from milebench.infer.api.client import ApiClient, unreachable
from milebench.infer.images import reading_image
from milebench.infer.records import IMAGE_PLACEHOLDER, FailureKind, ModelInput
from milebench.paths import ModelFolders
from milebench.spec.model import ApiModel, ModelSpec
from milebench.spec.policy import RunPolicy

log = logging.getLogger(__name__)

MIME_BY_FORMAT = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}
"""Formats every provider accepts as is; anything else is re-encoded as PNG."""


@dataclass(frozen=True)
class ImagePart:
    mime: str
    data: str
    """Base64 of the file bytes."""


Part = str | ImagePart
"""A prompt piece: text, or one image."""

PREFLIGHT_TIMEOUT_S = 10.0


def api_key(spec: ModelSpec, key_env: str) -> str:
    """The key the spec's requests carry: none for a keyless endpoint, else ``key_env``'s value."""
    weights = spec.weights
    if isinstance(weights, ApiModel) and weights.keyless:
        return ""
    key = os.environ.get(key_env, "")
    if not key:
        raise AdapterError(
            f"model spec {spec.name!r}: set {key_env} in the environment, or mark an endpoint that takes "
            "no key (a local server) with weights: {keyless: true}"
        )
    return key


def encode_image(path: Path) -> ImagePart:
    raw = path.read_bytes()
    with Image.open(io.BytesIO(raw)) as img:
        mime = MIME_BY_FORMAT.get(img.format or "")
        if mime is None:
            buffer = io.BytesIO()
            img.convert("RGB").save(buffer, format="PNG")
            raw, mime = buffer.getvalue(), "image/png"
    return ImagePart(mime, base64.b64encode(raw).decode("ascii"))


def prompt_parts(sample: ModelInput, data_root: Path) -> list[Part]:
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

    def __init__(
        self,
        spec: ModelSpec,
        paths: ModelFolders,
        data_root: Path,
        with_key: bool = True,
        *,
        policy: RunPolicy | None = None,
    ) -> None:
        """``with_key=False`` builds requests without sending any (``render-input``): no key is read. The
        provider's own window applies, whatever the ``policy``."""
        weights = spec.weights
        if not isinstance(weights, ApiModel) or weights.provider != self.provider:
            raise AdapterError(
                f"model spec {spec.name!r}: weights must be kind api, provider {self.provider}"
            )
        key = api_key(spec, self.key_env) if with_key else ""
        self.spec = spec
        self.weights = weights
        self.data_root = data_root
        self.key = key
        self.base_url = (os.environ.get(self.url_env) or weights.base_url or self.default_url).rstrip("/")
        self.client = ApiClient(weights.limits, key)
        self._usage: list[TokenUsage] = []
        self._answered = 0
        self._failed = 0
        self._tally = threading.Lock()

    @abstractmethod
    def url(self) -> str:
        """The endpoint that answers one request."""

    @abstractmethod
    def key_headers(self) -> dict[str, str]:
        """The headers that carry the key."""

    def protocol_headers(self) -> dict[str, str]:
        """Headers every request carries besides the key's."""
        return {}

    def headers(self) -> dict[str, str]:
        """The key's headers (none for a keyless endpoint) and the protocol's."""
        return (self.key_headers() if self.key else {}) | self.protocol_headers()

    def preflight(self) -> None:
        """One request to the endpoint's base URL before any sample: any HTTP answer will do, but a
        refused connection or an unknown host raises ``AdapterError`` at once."""
        try:
            with Deadline(PREFLIGHT_TIMEOUT_S):
                requests.get(
                    self.base_url, timeout=PREFLIGHT_TIMEOUT_S, allow_redirects=False, stream=True
                ).close()
        except requests.ConnectionError as err:
            why = unreachable(err)
            if why is not None:
                raise AdapterError(
                    f"model spec {self.spec.name!r}: endpoint {self.base_url} cannot be reached ({why}); "
                    f"is the server running? (the URL is weights.base_url or {self.url_env})"
                ) from None
        except requests.RequestException as err:
            log.warning("%s: pre-flight request to %s: %s", self.spec.name, self.base_url, err)
        log.info("%s: endpoint %s reachable", self.spec.name, self.base_url)

    def start_cell(self) -> None:
        """The next cell of the job starts: its first samples are counted afresh."""
        with self._tally:
            self._answered = self._failed = 0

    def stopped(self) -> bool:
        """Whether the cell's first ``FIRST_FAILURES`` answered samples all failed."""
        with self._tally:
            return self._failed >= FIRST_FAILURES and self._failed == self._answered

    def tally(self, failed: bool) -> None:
        with self._tally:
            self._answered += 1
            self._failed += failed

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

    def shown_request(self, sample: ModelInput) -> dict[str, Any]:
        """The request one sample is sent as, each image's data replaced by what it is: the body
        ``answer`` posts, readable (``render-input``)."""
        parts = prompt_parts(sample, self.data_root)
        images = iter(sample.images)
        shown = [
            ImagePart(p.mime, f"<image {next(images)}: {len(p.data)} characters of base64 elided>")
            if isinstance(p, ImagePart)
            else p
            for p in parts
        ]
        return {"url": self.url(), "body": self.body(shown)}

    def answer(self, sample: ModelInput) -> tuple[str | SampleFailure, TokenUsage]:
        """One sample's answer, or its failure with a redacted detail. An answer holding the key (a
        provider or proxy echoing the request) is a failure, and its text is never kept."""
        start = time.perf_counter()
        redactor = self.client.redactor
        if self.stopped():
            detail = f"not sent: the first {FIRST_FAILURES} samples all failed"
            return SampleFailure(FailureKind.API_ERROR, detail), TokenUsage(None, None, 0.0)
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
            self.tally(failed=True)
            return SampleFailure(err.kind, redactor.redact(str(err))), TokenUsage(
                None, None, time.perf_counter() - start
            )
        self.tally(failed=False)
        return text.strip(), TokenUsage(n_in, n_out, time.perf_counter() - start)

    def generate(self, samples: Sequence[ModelInput]) -> list[str | SampleFailure]:
        workers = min(self.weights.limits.concurrency, len(samples)) or 1
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=self.spec.name) as pool:
            results = list(pool.map(self.answer, samples))
        self._usage = [usage for _, usage in results]
        return [answer for answer, _ in results]

    def last_usage(self) -> list[TokenUsage]:
        return list(self._usage)
