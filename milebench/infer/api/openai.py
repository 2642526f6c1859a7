"""OpenAI-compatible Chat Completions (GPT-4o, GPT-4V as ``gpt-4-turbo``)."""

from __future__ import annotations

import re
from typing import Any

from milebench.infer.adapter import InferenceError
from milebench.infer.api.base import ApiAdapter, ImagePart, Part
from milebench.infer.records import FailureKind

ADAPTER = {
    "kind": "openai-chat",
    "does": "generate",
    "entry": "OpenAIChatAdapter",
    "environment": ["OPENAI_API_KEY", "OPENAI_BASE_URL"],
    "proxies": True,
}
"""What this module runs (milebench.spec.adapters)."""

OVERFLOW = re.compile(r"context_length_exceeded|maximum context length|too many images", re.IGNORECASE)


class OpenAIChatAdapter(ApiAdapter):
    provider = "openai"
    key_env = "OPENAI_API_KEY"
    url_env = "OPENAI_BASE_URL"
    default_url = "https://api.openai.com/v1"

    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def key_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def body(self, parts: list[Part]) -> dict[str, Any]:
        content = [
            {"type": "image_url", "image_url": {"url": f"data:{p.mime};base64,{p.data}"}}
            if isinstance(p, ImagePart)
            else {"type": "text", "text": p}
            for p in parts
        ]
        generation = self.spec.generation
        return {
            "model": self.weights.model_id,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": generation.max_new_tokens,
            "temperature": 0,
            "seed": generation.seed,
        }

    def read(self, body: Any) -> tuple[str, int | None, int | None]:
        choice = body["choices"][0]
        text = choice["message"].get("content")
        if not isinstance(text, str):
            reason = choice.get("finish_reason") or choice["message"].get("refusal")
            raise InferenceError(FailureKind.API_ERROR, f"answer without text (finish_reason {reason!r})")
        usage = body.get("usage") or {}
        return text, usage.get("prompt_tokens"), usage.get("completion_tokens")

    def overflow(self, status: int, message: str) -> bool:
        return status == 413 or (status == 400 and bool(OVERFLOW.search(message)))
