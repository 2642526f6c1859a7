"""The turn formats several model families share, declared once here (``milebench.spec.templates``).

``llava_llama_2`` renders what LLaVA's ``conv_templates["llava_llama_2"].get_prompt()`` returns for one
user message and an open assistant turn: the conversation's ``<s>`` separator is stripped from the
front, so the text starts at ``[INST]`` (the tokenizer adds BOS). ``vicuna_v1`` is VILA's and LLaMA-VID's
``conv_templates["vicuna_v1"].get_prompt()``. A family's own formats are declared and rendered in its
adapter module; checkpoint-defined formats (chat templates) are rendered by the adapters. The helpers below
are the ways the MiniGPT-4 descendants' ``Chat`` writes pictures into messages, which their families share.
"""

from __future__ import annotations

from milebench.infer.records import IMAGE_PLACEHOLDER

TEMPLATES = {
    "llava_llama_2": """LLaVA's ``llava_llama_2`` conversation, as the official MileBench LLaVA worker uses
    it: ``[INST] <<SYS>>\\n{system}\\n<</SYS>>\\n\\n{prompt} [/INST]``.""",
    "chat_template": """The checkpoint processor's own chat template, one user turn.""",
    "user_assistant": """``USER: {prompt} ASSISTANT:``, the format of the llava-hf LLaVA-1.5 model cards.""",
    "vicuna_v1": """LLaVA's ``conv_vicuna_v1`` for one user message and an open assistant turn:
    ``{system} USER: {prompt} ASSISTANT:``, its ``sep2`` ``</s>`` the stop keyword. VILA's
    (github.com/Efficient-Large-Model/VILA, ``llava/conversation.py``; the conversation its README runs
    VILA-7B with) and LLaMA-VID's copy (github.com/dvlab-research/LLaMA-VID, ``llamavid/conversation.py``;
    its video evaluation's ``--conv-mode vicuna_v1``) are the same text.""",
    "plain": """The prepared prompt as it is (API messages, baselines).""",
}
"""The shared turn formats (milebench.spec.templates); each one but ``chat_template`` is the function of its
name below."""

LLAVA_LLAMA_2_SYSTEM = (
    "You are a helpful language and vision assistant. You are able to understand the visual content "
    "that the user provides, and assist the user with a variety of tasks using natural language."
)
LLAVA_LLAMA_2_STOP = "<s>"
"""The conversation's ``sep``, which the official worker passes as its stop keyword."""

VICUNA_V1_SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions."
)
VICUNA_V1_STOP = "</s>"
"""The conversation's ``sep2`` (separator style TWO), which VILA's ``run_llava.py`` and LLaMA-VID's video
evaluation pass as their stop keyword."""


def llava_llama_2(prompt: str) -> str:
    return f"[INST] <<SYS>>\n{LLAVA_LLAMA_2_SYSTEM}\n<</SYS>>\n\n{prompt} [/INST]"


def vicuna_v1(prompt: str) -> str:
    return f"{VICUNA_V1_SYSTEM} USER: {prompt} ASSISTANT:"


def user_assistant(prompt: str) -> str:
    return f"USER: {prompt} ASSISTANT:"


def plain(prompt: str) -> str:
    return prompt


def joined_message(prompt: str, image: str) -> str:
    """One user message as the MiniGPT-4 descendants' ``Chat.ask`` joins turns: the pieces between
    ``<ImageHere>`` placeholders that are not blank and ``image`` per picture, in order, joined by spaces."""
    pieces = prompt.split("<ImageHere>")
    parts: list[str] = []
    for i, piece in enumerate(pieces):
        parts += [piece] if piece.strip() else []
        parts += [image] if i < len(pieces) - 1 else []
    return " ".join(parts)


def without_pictures(prompt: str) -> str:
    """The prompt with its image placeholders taken out: the pictures reach a video model as one video."""
    return prompt.replace(IMAGE_PLACEHOLDER, "")
