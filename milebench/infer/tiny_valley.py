"""A tiny random-weight Valley in the layout of the original checkpoint (luoruipu1/Valley2-7b, as
``valley/train/train.py`` saves it), so the hf-valley adapter loads it as it loads the real one.

The folder holds a Llama with ``model.mm_projector`` and ``model.vision_tower`` in a ``.bin`` shard with
its index (training saves the whole model), a config of model type ``valley`` with the keys
``initialize_vision_modules`` writes (``mm_vision_tower``, ``mm_hidden_size``, ``mm_vision_select_layer``
-2 of ``valley_stage2.yaml``, ``use_mm_proj``), and the tiny family's tokenizer (as the tiny VILA's, BOS
first as Llama-2's) with the six tokens ``initialize_vision_tokenizer`` adds. The real config names
its tower by hub name (openai/clip-vit-large-patch14); the tiny one names a folder beside the weights,
``vision_tower``, with a CLIP tower of Valley's fixed shape at tiny depth (1024 features, which the
original's dummy projection requires, and 256 patches, which ``build_inputs`` writes), the same weights in
a ``.bin`` as the hub's tower has them, and its image processor.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from tokenizers import processors
from transformers import CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, PreTrainedTokenizerFast

from milebench.infer.tiny import HEADS, LAYERS, build_tokenizer, text_fields, tiny_shape
from milebench.infer.tiny_llama_vid import write_bin_shard
from milebench.infer.tiny_vila import SELECT_LAYER, VISION_TOWER
from milebench.infer.valley_model import DUMMY_WIDTH, PATCHES, VISION_TOKENS, ValleyForCausalLM
from milebench.spec.model import ModelSpec

BIN = "pytorch_model.bin"
TOWER_IMAGE_SIZE = 64
"""16 x 16 patches of 4 pixels: ``build_inputs``' 256 ``<im_patch>``."""


def tiny_tower() -> CLIPVisionConfig:
    side = int(PATCHES**0.5)
    return CLIPVisionConfig(
        hidden_size=DUMMY_WIDTH,
        intermediate_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        image_size=TOWER_IMAGE_SIZE,
        patch_size=TOWER_IMAGE_SIZE // side,
    )


def save_tokenizer(out_dir: Path) -> PreTrainedTokenizerFast:
    """The tiny family's tokenizer with BOS first, as Llama-2's, and Valley's tokens added as
    ``initialize_vision_tokenizer`` adds them."""
    tokenizer = build_tokenizer()
    bos = [(str(tokenizer.bos_token), int(tokenizer.bos_token_id))]
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=bos
    )
    tokenizer.add_tokens(list(VISION_TOKENS[:2]), special_tokens=True)
    tokenizer.add_tokens(list(VISION_TOKENS[2:]), special_tokens=True)
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def build_tiny_valley(spec: ModelSpec, out_dir: Path) -> None:
    """Write model, tower and tokenizer of ``spec`` into ``out_dir`` in Valley's layout."""
    shape = tiny_shape(spec, "valley")
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = save_tokenizer(out_dir)
    config = LlamaConfig(**text_fields(tokenizer, shape.max_context_len))
    valley_keys = {
        "mm_vision_tower": VISION_TOWER,
        "mm_hidden_size": DUMMY_WIDTH,
        "mm_vision_select_layer": SELECT_LAYER,
        "use_mm_proj": True,
        "use_patch_importance_pooling": False,
        "use_delta_transformer": False,
    }
    for key, value in valley_keys.items():
        setattr(config, key, value)
    tower = tiny_tower()
    config.tower_config = tower.to_dict()
    torch.manual_seed(shape.seed)
    model = ValleyForCausalLM(config)
    # The names transformers before 5 gave the tower, in the checkpoint and (as the hub's CLIP towers hold
    # them, a .bin) in the tower's folder.
    state = {
        re.sub(r"^model\.vision_tower\.", "model.vision_tower.vision_model.", k): v
        for k, v in model.state_dict().items()
    }
    write_bin_shard(state, out_dir)
    tower_dir = out_dir / VISION_TOWER
    tower.save_pretrained(tower_dir)
    prefix = "model.vision_tower."
    torch.save(
        {k.removeprefix(prefix): v.contiguous() for k, v in state.items() if k.startswith(prefix)},
        tower_dir / BIN,
    )
    CLIPImageProcessor(
        size={"shortest_edge": TOWER_IMAGE_SIZE},
        crop_size={"height": TOWER_IMAGE_SIZE, "width": TOWER_IMAGE_SIZE},
    ).save_pretrained(tower_dir)
    saved = {**config.to_dict(), "model_type": "valley", "architectures": ["ValleyLlamaForCausalLM"]}
    saved.pop("tower_config")
    (out_dir / "config.json").write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n", encoding="utf-8")
