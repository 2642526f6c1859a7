"""Google Gemini ``generateContent`` (Gemini 1.0 Pro Vision, Gemini 1.5 Pro).

The key travels in the ``x-goog-api-key`` header, never in the URL, so no log line can carry it.
"""

from __future__ import annotations

import re
from typing import Any

from milebench.infer.adapter import InferenceError
from milebench.infer.api.base import ApiAdapter, ImagePart, Part
from milebench.infer.records import FailureKind

ADAPTER = {
    "kind": "gemini",
    "does": "generate",
    "entry": "GeminiAdapter",
    "environment": ["GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"],
    "proxies": True,
}
"""What this module runs (milebench.spec.adapters)."""

OVERFLOW = re.compile(
    r"exceeds the maximum number of tokens|input token count|too many images|request payload size exceeds",
    re.IGNORECASE,
)


class GeminiAdapter(ApiAdapter):
    provider = "google"
    key_env = "GOOGLE_API_KEY"
    url_env = "GOOGLE_GEMINI_BASE_URL"
    default_url = "https://generativelanguage.googleapis.com"

    def url(self) -> str:
        return f"{self.base_url}/v1beta/models/{self.weights.model_id}:generateContent"

    def key_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self.key}

    def body(self, parts: list[Part]) -> dict[str, Any]:
        wire = [
            {"inline_data": {"mime_type": p.mime, "data": p.data}}
            if isinstance(p, ImagePart)
            else {"text": p}
            for p in parts
        ]
        return {
            "contents": [{"role": "user", "parts": wire}],
            "generationConfig": {
                "temperature": 0,
                "candidateCount": 1,
                "maxOutputTokens": self.spec.generation.max_new_tokens,
            },
        }

    def read(self, body: Any) -> tuple[str, int | None, int | None]:
        candidates = body.get("candidates") or []
        parts = candidates[0].get("content", {}).get("parts", []) if candidates else []
        texts = [p["text"] for p in parts if "text" in p]
        if not texts:
            blocked = (body.get("promptFeedback") or {}).get("blockReason")
            finish = candidates[0].get("finishReason") if candidates else None
            raise InferenceError(
                FailureKind.API_ERROR,
                f"answer without text (blockReason {blocked!r}, finishReason {finish!r})",
            )
        usage = body.get("usageMetadata") or {}
        return "".join(texts), usage.get("promptTokenCount"), usage.get("candidatesTokenCount")

    def overflow(self, status: int, message: str) -> bool:
        return status == 413 or (status == 400 and bool(OVERFLOW.search(message)))
