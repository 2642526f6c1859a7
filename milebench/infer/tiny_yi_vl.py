"""A tiny random-weight Yi-VL in the layout of the original checkpoint (01-ai/Yi-VL-6B), so the hf-yi-vl
adapter loads it exactly as it loads the real one.

The main folder holds a Llama with the ``model.mm_projector`` weights of an ``mlp2x_gelu_Norm`` projector,
a config of model type ``llava`` carrying the original's ``mm_*`` and ``image_aspect_ratio: pad`` keys,
and the tokenizer; the vision tower (a CLIP tower of ``n_tokens_per_image`` patches, the CLS feature
dropped by ``mm_vision_select_feature: patch``) and its image processor lie in the subfolder that
``mm_vision_tower`` names, as Yi-VL's ``vit/`` folder does. Both weight files are written as released
(``milebench.infer.tiny.as_released``).
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
from milebench.infer.yi_vl_model import YiVLForCausalLM
from milebench.spec.model import ModelSpec

VISION_TOWER = "./vit/clip-vit-tiny"
"""``mm_vision_tower`` as the original config writes it: relative to the checkpoint."""
SELECT_LAYER = -2
"""The tower's second-to-last hidden state, so the selection matters with two layers."""


def build_tiny_yi_vl(spec: ModelSpec, out_dir: Path) -> None:
    """Write model, tower and tokenizer of ``spec`` into ``out_dir`` in Yi-VL's layout."""
    shape = tiny_shape(spec, "yi-vl")
    tokenizer = build_tokenizer()
    vision = vision_config(shape.n_tokens_per_image)
    config = LlamaConfig(**text_fields(tokenizer, shape.max_context_len))
    yi_keys = {
        "mm_vision_tower": VISION_TOWER,
        "mm_hidden_size": vision.hidden_size,
        "mm_projector_type": "mlp2x_gelu_Norm",
        "mm_vision_select_layer": SELECT_LAYER,
        "mm_vision_select_feature": "patch",
        "mm_use_im_start_end": False,
        "image_aspect_ratio": "pad",
    }
    for key, value in yi_keys.items():
        setattr(config, key, value)
    torch.manual_seed(shape.seed)
    model = YiVLForCausalLM(config)
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
    # The original config is LLaVA's (model type llava, its own class); transformers writes Llama's.
    path = out_dir / "config.json"
    saved = json.loads(path.read_text(encoding="utf-8"))
    saved.update(model_type="llava", architectures=["LlavaLlamaForCausalLM"], **yi_keys)
    path.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n", encoding="utf-8")
