"""A tiny random-weight LLaVA-NeXT (LLaVA-1.6), written in the layout of a llava-hf hub checkpoint (model,
processor with its any-res image processor, tokenizer and the hub's chat template), so the hf-llava-next
adapter loads it exactly as it loads the real one.

Any-res as in LLaVA-1.6: each image is resized onto the best of three grids of 32x32 tiles (1x1, 1x2,
2x1), every tile and a 32x32 overview go through the vision tower, and the tile features keep the
image's aspect ratio (padding rows or columns are cut) with a newline feature after each row. With
``s`` x ``s`` patches per tile an image costs between ``s*s + s*s + s`` tokens (a square) and
``3*s*s + 2*s`` (a 1:2 portrait); the spec's ``n_tokens_per_image`` is that maximum, so truncation
never counts an image short.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import (
    LlamaConfig,
    LlavaNextConfig,
    LlavaNextForConditionalGeneration,
    LlavaNextImageProcessorPil,
    LlavaNextProcessor,
)

from milebench.infer.adapter import AdapterError
from milebench.infer.tiny import (
    FEATURE_STRATEGY,
    IMAGE_SIZE,
    IMAGE_TOKEN,
    LLAVA_HF_CHAT_TEMPLATE,
    build_tokenizer,
    text_fields,
    tiny_shape,
    token_id,
    vision_config,
)
from milebench.spec.model import ModelSpec

GRID_PINPOINTS = ((IMAGE_SIZE, IMAGE_SIZE), (IMAGE_SIZE, 2 * IMAGE_SIZE), (2 * IMAGE_SIZE, IMAGE_SIZE))
"""Height x width of the any-res grids: one tile, two side by side, two stacked."""


def max_image_tokens(side: int) -> int:
    """The most tokens one image costs with ``side`` x ``side`` patches per tile (a 1:2 portrait)."""
    return 3 * side * side + 2 * side


def patch_side(n_tokens_per_image: int) -> int:
    """Patches per tile side whose largest image costs exactly ``n_tokens_per_image`` tokens."""
    sides = [s for s in range(1, IMAGE_SIZE + 1) if IMAGE_SIZE % s == 0]
    for side in sides:
        if max_image_tokens(side) == n_tokens_per_image:
            return side
    allowed = ", ".join(str(max_image_tokens(s)) for s in sides)
    raise AdapterError(f"tiny llava-next: n_tokens_per_image {n_tokens_per_image} must be one of {allowed}")


def build_tiny_llava_next(spec: ModelSpec, out_dir: Path) -> None:
    """Write model and processor of ``spec`` into ``out_dir`` (``from_pretrained`` loads it)."""
    shape = tiny_shape(spec, "llava-next")
    side = patch_side(shape.n_tokens_per_image)
    tokenizer = build_tokenizer()
    vision = vision_config(side * side)
    text = LlamaConfig(**text_fields(tokenizer, shape.max_context_len))
    pinpoints = [list(p) for p in GRID_PINPOINTS]
    config = LlavaNextConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=token_id(tokenizer, IMAGE_TOKEN),
        image_grid_pinpoints=pinpoints,
        image_seq_length=side * side,
        vision_feature_select_strategy=FEATURE_STRATEGY,
        vision_feature_layer=-1,
    )
    torch.manual_seed(shape.seed)
    model = LlavaNextForConditionalGeneration(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    processor = LlavaNextProcessor(
        image_processor=LlavaNextImageProcessorPil(
            size={"shortest_edge": IMAGE_SIZE},
            crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
            image_grid_pinpoints=pinpoints,
        ),
        tokenizer=tokenizer,
        patch_size=vision.patch_size,
        vision_feature_select_strategy=FEATURE_STRATEGY,
        num_additional_image_tokens=1,
        image_token=IMAGE_TOKEN,
        chat_template=LLAVA_HF_CHAT_TEMPLATE,
    )
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
