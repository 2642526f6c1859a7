"""A tiny random-weight Qwen2-VL, written in the layout of a hub checkpoint (model, tokenizer with its chat
template, image processor config), so the hf-qwen2-vl adapter loads it exactly as it loads the real one.

Images are cut into 8x8 patches and 2x2 patches merge into one token, so an image of 16x16 pixels is one
token; the adapter sizes images from the spec's ``n_tokens_per_image``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import torch
from transformers import (
    PreTrainedTokenizerFast,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen2VLImageProcessorPil,
)

from milebench.infer.tiny import (
    HEADS,
    HIDDEN,
    LAYERS,
    VLLM_HEADS,
    text_fields,
    tiny_shape,
    token_id,
    train_bpe,
)
from milebench.spec.model import ModelSpec

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = (
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
SPECIAL_TOKENS = (PAD, IM_START, IM_END, VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD)
PATCH = 8
MERGE = 2

RELEASED_MIN_PIXELS, RELEASED_MAX_PIXELS = 56 * 56, 28 * 28 * 16384
"""The image processor's pixel range in Qwen2-VL-7B-Instruct's preprocessor_config.json."""


def mrope_section(heads: int) -> tuple[int, int, int]:
    """Rotary sections (time, height, width) in Qwen2-VL's 2:3:3 proportion; they sum to half the head
    size of a language model of width HIDDEN with ``heads`` heads."""
    half = HIDDEN // heads // 2
    return half // 4, 3 * half // 8, 3 * half // 8


CHAT_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Qwen2-VL's chat format: a default system turn, each image as vision-start, image pad, vision-end."""


def vision_config() -> dict[str, int]:
    """The tiny Qwen2-VL vision tower (MileBench's smoke model and the tiny Qwen2-VL embedder); a new dict
    each time, since a config may write into the one it is given."""
    return {
        "depth": LAYERS,
        "embed_dim": HIDDEN,
        "hidden_size": HIDDEN,
        "num_heads": HEADS,
        "mlp_ratio": 2,
        "patch_size": PATCH,
        "spatial_merge_size": MERGE,
    }


class VisionTokenIds(TypedDict):
    image_token_id: int
    video_token_id: int
    vision_start_token_id: int
    vision_end_token_id: int


def vision_token_ids(tokenizer: PreTrainedTokenizerFast) -> VisionTokenIds:
    """The config's ids of the image, video and vision-boundary tokens, read from ``tokenizer``."""
    return VisionTokenIds(
        image_token_id=token_id(tokenizer, IMAGE_PAD),
        video_token_id=token_id(tokenizer, VIDEO_PAD),
        vision_start_token_id=token_id(tokenizer, VISION_START),
        vision_end_token_id=token_id(tokenizer, VISION_END),
    )


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Qwen-style special tokens around the trained BPE, with the chat template."""
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=train_bpe(SPECIAL_TOKENS, None),
        eos_token=IM_END,
        pad_token=PAD,
        padding_side="left",
        extra_special_tokens={
            "image_token": IMAGE_PAD,
            "video_token": VIDEO_PAD,
            "vision_bos_token": VISION_START,
            "vision_eos_token": VISION_END,
        },
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_qwen2_vl(spec: ModelSpec, out_dir: Path) -> None:
    """Write model, tokenizer and image processor of ``spec`` into ``out_dir``."""
    shape = tiny_shape(spec, "qwen2-vl")
    tokenizer = build_tokenizer()
    config = Qwen2VLConfig(
        # One head as wide as the model, as the tiny LLaVA: so vLLM's CPU build runs its vllm variant.
        text_config={
            **text_fields(tokenizer, shape.max_context_len, VLLM_HEADS),
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": list(mrope_section(VLLM_HEADS)),
            },
        },
        vision_config=vision_config(),
        **vision_token_ids(tokenizer),
    )
    torch.manual_seed(shape.seed)
    model = Qwen2VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # The pixel range Qwen2-VL's hub checkpoints save, not the spec's: the adapter sizes every picture by
    # the spec's image-token bounds, and another engine (vLLM) must be told them, as with a real model.
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=PATCH, merge_size=MERGE, min_pixels=RELEASED_MIN_PIXELS, max_pixels=RELEASED_MAX_PIXELS
    )
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    image_processor.save_pretrained(out_dir)
