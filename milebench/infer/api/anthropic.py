"""Anthropic Messages API (Claude 3 Opus)."""

from __future__ import annotations

import re
from typing import Any

from milebench.infer.adapter import InferenceError
from milebench.infer.api.base import ApiAdapter, ImagePart, Part
from milebench.infer.records import FailureKind

ADAPTER = {
    "kind": "anthropic",
    "does": "generate",
    "entry": "AnthropicAdapter",
    "environment": ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"],
    "proxies": True,
}
"""What this module runs (milebench.spec.adapters)."""

API_VERSION = "2023-06-01"
OVERFLOW = re.compile(r"prompt is too long|too many images|exceed.*context", re.IGNORECASE)


class AnthropicAdapter(ApiAdapter):
    provider = "anthropic"
    key_env = "ANTHROPIC_API_KEY"
    url_env = "ANTHROPIC_BASE_URL"
    default_url = "https://api.anthropic.com"

    def url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def key_headers(self) -> dict[str, str]:
        return {"x-api-key": self.key}

    def protocol_headers(self) -> dict[str, str]:
        return {"anthropic-version": API_VERSION}

    def body(self, parts: list[Part]) -> dict[str, Any]:
        content = [
            {"type": "image", "source": {"type": "base64", "media_type": p.mime, "data": p.data}}
            if isinstance(p, ImagePart)
            else {"type": "text", "text": p}
            for p in parts
        ]
        return {
            "model": self.weights.model_id,
            "max_tokens": self.spec.generation.max_new_tokens,
            "temperature": 0,
            "messages": [{"role": "user", "content": content}],
        }

    def read(self, body: Any) -> tuple[str, int | None, int | None]:
        texts = [block["text"] for block in body["content"] if block.get("type") == "text"]
        if not texts:
            raise InferenceError(
                FailureKind.API_ERROR, f"answer without text (stop_reason {body.get('stop_reason')!r})"
            )
        usage = body.get("usage") or {}
        return "".join(texts), usage.get("input_tokens"), usage.get("output_tokens")

    def overflow(self, status: int, message: str) -> bool:
        return status == 413 or (status == 400 and bool(OVERFLOW.search(message)))
