"""A tiny random-weight VILA in the layout of the original checkpoint (Efficient-Large-Model/VILA-7b), so
the hf-vila adapter loads it exactly as it loads the real one.

The main folder holds a Llama with the ``model.mm_projector`` weights of an ``mlp2x_gelu`` projector, a
config of model type ``llava_llama`` carrying the keys VILA's training script writes
(``scripts/v1_5/paper/3_sft.sh``: ``image_aspect_ratio: pad``, no added image tokens, the tower's
second-to-last layer, ``tokenizer_model_max_length``), and the tokenizer. The real config names its
vision tower by hub name (CLIP ViT-L/14-336, which the original downloads); the tiny one names a folder
beside the weights, ``vision_tower``, holding a CLIP tower of ``n_tokens_per_image`` patches (the CLS
feature dropped by ``mm_vision_select_feature: patch``) and its image processor. Weights are written as
released (``milebench.infer.tiny.as_released``).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import CLIPImageProcessor, CLIPVisionModel, LlamaConfig

from milebench.infer.tiny import (
    IMAGE_SIZE,
    as_released,
    build_tokenizer,
    text_fields,
    tiny_shape,
    vision_config,
)
from milebench.infer.vila_model import VilaForCausalLM
from milebench.spec.model import ModelSpec

VISION_TOWER = "./vision_tower"
"""``mm_vision_tower`` of the tiny config: a folder of the checkpoint."""
SELECT_LAYER = -2
"""The tower's second-to-last hidden state (the training script's), so the selection matters with two
layers."""


def build_tiny_vila(spec: ModelSpec, out_dir: Path) -> None:
    """Write model, tower and tokenizer of ``spec`` into ``out_dir`` in VILA's layout."""
    shape = tiny_shape(spec, "vila")
    tokenizer = build_tokenizer()
    vision = vision_config(shape.n_tokens_per_image)
    config = LlamaConfig(**text_fields(tokenizer, shape.max_context_len))
    vila_keys = {
        "mm_vision_tower": VISION_TOWER,
        "mm_hidden_size": vision.hidden_size,
        "mm_projector_type": "mlp2x_gelu",
        "mm_vision_select_layer": SELECT_LAYER,
        "mm_vision_select_feature": "patch",
        "mm_use_im_start_end": False,
        "mm_use_im_patch_token": False,
        "image_aspect_ratio": "pad",
        "tokenizer_model_max_length": shape.max_context_len,
        "tokenizer_padding_side": "right",
        "use_mm_proj": True,
    }
    for key, value in vila_keys.items():
        setattr(config, key, value)
    torch.manual_seed(shape.seed)
    model = VilaForCausalLM(config)
    tower = CLIPVisionModel(vision)
    model.save_pretrained(out_dir)
    as_released(out_dir / "model.safetensors", None)
    tokenizer.save_pretrained(out_dir)
    tower_dir = out_dir / VISION_TOWER
    tower.save_pretrained(tower_dir)
    as_released(tower_dir / "model.safetensors", "")
    CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    ).save_pretrained(tower_dir)
    # The original config is VILA's (model type llava_llama, its own class); transformers writes Llama's.
    path = out_dir / "config.json"
    saved = json.loads(path.read_text(encoding="utf-8"))
    saved.update(model_type="llava_llama", architectures=["LlavaLlamaForCausalLM"], **vila_keys)
    path.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n", encoding="utf-8")
