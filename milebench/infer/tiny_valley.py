"""A tiny random-weight Valley in the layout of the original checkpoint (luoruipu1/Valley2-7b, as
``valley/train/train.py`` saves it), so the hf-valley adapter loads it as it loads the real one.

The folder holds a Llama with ``model.mm_projector`` in a ``.bin`` shard with its index, a config of
model type ``valley`` with the keys ``initialize_vision_modules`` writes (``mm_vision_tower``,
``mm_hidden_size``, ``mm_vision_select_layer`` -2 of ``valley_stage2.yaml``, ``use_mm_proj``), and
Llama-2's tokenizer files with the six tokens ``initialize_vision_tokenizer`` adds (also as the
``added_tokens.json`` and ``special_tokens_map.json`` the tokenizers of 2023 read). The real config names
its tower by hub name (openai/clip-vit-large-patch14); the tiny one names a folder beside the weights,
``vision_tower``, with a CLIP tower of Valley's fixed shape at tiny depth (1024 features, which the
original's dummy projection requires, and 256 patches, which ``build_inputs`` writes), its weights in a
``.bin`` as the hub's tower has them, and its image processor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import torch
from transformers import (
    AutoTokenizer,
    CLIPImageProcessor,
    CLIPVisionConfig,
    CLIPVisionModel,
    PreTrainedTokenizerFast,
)

from milebench.infer.tiny import HEADS, LAYERS, tiny_shape, token_id
from milebench.infer.tiny_llama_vid import write_bin_shard
from milebench.infer.tiny_minigpt_v2 import TOKENIZER_MODEL, tiny_llama_config, train_sentencepiece
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
    """Llama-2's tokenizer with Valley's tokens added as ``initialize_vision_tokenizer`` adds them."""
    (out_dir / TOKENIZER_MODEL).write_bytes(train_sentencepiece())
    # legacy: the word-start marker on every text piece, as the tokenizers of 2023 have it; BOS first.
    loaded = AutoTokenizer.from_pretrained(out_dir, legacy=True, add_bos_token=True)
    tokenizer = cast(PreTrainedTokenizerFast, loaded)
    tokenizer.add_tokens(list(VISION_TOKENS[:2]), special_tokens=True)
    tokenizer.add_tokens(list(VISION_TOKENS[2:]), special_tokens=True)
    tokenizer.save_pretrained(out_dir)
    added = {token: token_id(tokenizer, token) for token in VISION_TOKENS}
    (out_dir / "added_tokens.json").write_text(json.dumps(added, indent=2) + "\n", encoding="utf-8")
    special = {
        "bos_token": tokenizer.bos_token,
        "eos_token": tokenizer.eos_token,
        "unk_token": tokenizer.unk_token,
        "additional_special_tokens": list(VISION_TOKENS),
    }
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n", encoding="utf-8")
    return tokenizer


def build_tiny_valley(spec: ModelSpec, out_dir: Path) -> None:
    """Write model, tower and tokenizer of ``spec`` into ``out_dir`` in Valley's layout."""
    shape = tiny_shape(spec, "valley")
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = save_tokenizer(out_dir)
    config = tiny_llama_config(tokenizer, shape.max_context_len)
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
    torch.manual_seed(shape.seed)
    model = ValleyForCausalLM(config)
    write_bin_shard(model.state_dict(), out_dir)
    tower_dir = out_dir / VISION_TOWER
    tower = CLIPVisionModel(tiny_tower())
    tower.config.save_pretrained(tower_dir)
    # As the hub's CLIP towers hold them: a .bin under the names transformers before 5 gave the tower.
    torch.save({f"vision_model.{k}": v.contiguous() for k, v in tower.state_dict().items()}, tower_dir / BIN)
    CLIPImageProcessor(
        size={"shortest_edge": TOWER_IMAGE_SIZE},
        crop_size={"height": TOWER_IMAGE_SIZE, "width": TOWER_IMAGE_SIZE},
    ).save_pretrained(tower_dir)
    saved = {**config.to_dict(), "model_type": "valley", "architectures": ["ValleyLlamaForCausalLM"]}
    (out_dir / "config.json").write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n", encoding="utf-8")
