"""Fixed turn formats around a prompt whose image tokens are already in place.

``llava_llama_2`` renders what LLaVA's ``conv_templates["llava_llama_2"].get_prompt()`` returns for one
user message and an open assistant turn: the conversation's ``<s>`` separator is stripped from the
front, so the text starts at ``[INST]`` (the tokenizer adds BOS). Checkpoint-defined formats (chat
templates, Qwen's ``chat``) are rendered by their adapters.
"""

from __future__ import annotations

from collections.abc import Callable

from milebench.spec.execution import PromptTemplate

LLAVA_LLAMA_2_SYSTEM = (
    "You are a helpful language and vision assistant. You are able to understand the visual content "
    "that the user provides, and assist the user with a variety of tasks using natural language."
)
LLAVA_LLAMA_2_STOP = "<s>"
"""The conversation's ``sep``, which the official worker passes as its stop keyword."""


def llava_llama_2(prompt: str) -> str:
    return f"[INST] <<SYS>>\n{LLAVA_LLAMA_2_SYSTEM}\n<</SYS>>\n\n{prompt} [/INST]"


def user_assistant(prompt: str) -> str:
    return f"USER: {prompt} ASSISTANT:"


def plain(prompt: str) -> str:
    return prompt


FIXED_TEMPLATES: dict[PromptTemplate, Callable[[str], str]] = {
    PromptTemplate.LLAVA_LLAMA_2: llava_llama_2,
    PromptTemplate.USER_ASSISTANT: user_assistant,
    PromptTemplate.PLAIN: plain,
}
