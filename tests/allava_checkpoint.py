"""A stand-in ALLaVA-3B-Longer checkpoint in the hub repository's format, built offline: the stand-in's
remote code and configs (``allava_standin``), a Phi-2-style tokenizer (byte-level BPE whose one special
token ``<|endoftext|>`` is BOS, EOS and UNK, class CodeGenTokenizer), a CLIP vision tower folder that
``mm_vision_tower`` names (16 px pictures in 8 px patches: 4 features each) and random weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    CLIPImageProcessor,
    CLIPVisionConfig,
    PreTrainedTokenizerFast,
)

from milebench.infer.tiny import train_bpe
from milebench.spec.model import ModelSpec
from milebench.spec.registry import load_specs

STANDIN = Path(__file__).parent / "allava_standin"
ENDOFTEXT = "<|endoftext|>"
PICTURE_SIDE = 16
PATCH = 8
FEATURES_PER_IMAGE = (PICTURE_SIDE // PATCH) ** 2


def build_allava(folder: Path, seed: int = 0) -> Path:
    """The stand-in checkpoint in ``folder``; the same seed gives the same weights."""
    shutil.copytree(STANDIN, folder)
    tower = folder / "vision_tower"
    CLIPVisionConfig(
        image_size=PICTURE_SIDE, patch_size=PATCH, hidden_size=8, num_attention_heads=2
    ).save_pretrained(tower)
    CLIPImageProcessor(
        size={"shortest_edge": PICTURE_SIDE}, crop_size={"height": PICTURE_SIDE, "width": PICTURE_SIDE}
    ).save_pretrained(tower)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=train_bpe((ENDOFTEXT,), None),
        bos_token=ENDOFTEXT,
        eos_token=ENDOFTEXT,
        unk_token=ENDOFTEXT,
    )
    tokenizer.save_pretrained(folder)
    edit_json(folder / "tokenizer_config.json", tokenizer_class="CodeGenTokenizer")
    edit_json(folder / "config.json", mm_vision_tower=str(tower), vocab_size=len(tokenizer))
    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, trust_remote_code=True)
    weights = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def edit_json(path: Path, **fields: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}, indent=2))


def allava_spec(folder: Path, **fields: Any) -> ModelSpec:
    """The kit's allava-longer spec with the stand-in as its hub repository."""
    data = load_specs().models["allava-longer"].model_dump()
    data.update(
        weights={"kind": "hf", "repo_id": str(folder), "trust_remote_code": True},
        generation={"max_new_tokens": 6},
    )
    data.update(fields)
    return ModelSpec.model_validate(data)
