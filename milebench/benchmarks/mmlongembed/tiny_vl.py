"""Tiny random-weight Qwen2-VL and Qwen3-VL embedders, written in the layout of a hub checkpoint (model,
tokenizer with its chat template, image processor), so the embedding adapter loads them through
``from_pretrained`` exactly as it loads GME or Qwen3-VL-Embedding.

Both share the tiny Qwen2-VL tokenizer of MileBench's smoke model (``milebench.infer.tiny_qwen2_vl``):
8x8 patches, 2x2 merged, so a 16x16 picture is one image token. The same seed gives the same weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import (
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen2VLImageProcessorPil,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
)

from milebench.benchmarks.mmlongembed.spec import TinyEmbedWeights, VlmEmbedder
from milebench.infer.adapter import AdapterError
from milebench.infer.tiny import HEADS, HIDDEN, LAYERS, text_fields
from milebench.infer.tiny_qwen2_vl import (
    MERGE,
    PATCH,
    build_tokenizer,
    mrope_section,
    vision_config,
    vision_token_ids,
)


def _text_config(tokenizer: PreTrainedTokenizerFast, window: int) -> dict[str, Any]:
    return {
        **text_fields(tokenizer, window),
        "head_dim": HIDDEN // HEADS,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": list(mrope_section(HEADS)),
        },
    }


def _qwen2_vl(tokenizer: PreTrainedTokenizerFast, window: int) -> PreTrainedModel:
    config = Qwen2VLConfig(
        text_config=_text_config(tokenizer, window),
        vision_config=vision_config(),
        **vision_token_ids(tokenizer),
    )
    return Qwen2VLForConditionalGeneration(config)


def _qwen3_vl(tokenizer: PreTrainedTokenizerFast, window: int) -> PreTrainedModel:
    config = Qwen3VLConfig(
        text_config=_text_config(tokenizer, window),
        vision_config={
            "depth": LAYERS,
            "hidden_size": HIDDEN,
            "intermediate_size": 2 * HIDDEN,
            "num_heads": HEADS,
            "patch_size": PATCH,
            "spatial_merge_size": MERGE,
            "out_hidden_size": HIDDEN,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0],
        },
        **vision_token_ids(tokenizer),
    )
    return Qwen3VLForConditionalGeneration(config)


BACKBONES = {"hf-qwen2-vl-embed": _qwen2_vl, "hf-qwen3-vl-embed": _qwen3_vl}


def build_tiny_vl_embedder(spec: VlmEmbedder, out_dir: Path) -> None:
    """Write model, tokenizer and image processor of ``spec``'s backbone into ``out_dir``."""
    weights = spec.weights
    if not isinstance(weights, TinyEmbedWeights):
        raise AdapterError(f"embedder {spec.name!r}: weights are {weights.kind!r}, not tiny")
    tokenizer = build_tokenizer()
    torch.manual_seed(weights.seed)
    model = BACKBONES[spec.kind](tokenizer, spec.window)
    token_pixels = (PATCH * MERGE) ** 2
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=PATCH,
        merge_size=MERGE,
        min_pixels=spec.min_image_tokens * token_pixels,
        max_pixels=spec.max_image_tokens * token_pixels,
    )
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    image_processor.save_pretrained(out_dir)
