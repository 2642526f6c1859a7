"""Stand-in checkpoints of the remote-code models in their hub repositories' format, built offline: the
stand-ins' code and configs (``qwen_vl_chat_standin``, ``allava_standin``) plus what the real repositories
hold beside them, with random weights.

ALLaVA's holds a Phi-2-style tokenizer (byte-level BPE whose one special token ``<|endoftext|>`` is BOS,
EOS and UNK, class CodeGenTokenizer) and a CLIP vision tower folder that ``mm_vision_tower`` names
(16 px pictures in 8 px patches: 4 features each).
"""

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

from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.infer.tiny import train_bpe
from milebench.spec.model import ModelSpec

HERE = Path(__file__).parent
ENDOFTEXT = "<|endoftext|>"
PICTURE_SIDE = 16
PATCH = 8
FEATURES_PER_IMAGE = (PICTURE_SIDE // PATCH) ** 2


def random_weights(folder: Path, seed: int) -> Path:
    """Weights initialised from ``seed`` for the remote-code model whose code and config ``folder`` holds."""
    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, trust_remote_code=True)
    weights = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def build_qwen_vl_chat(folder: Path, seed: int = 0) -> Path:
    shutil.copytree(HERE / "qwen_vl_chat_standin", folder)
    return random_weights(folder, seed)


def build_allava(folder: Path, seed: int = 0) -> Path:
    shutil.copytree(HERE / "allava_standin", folder)
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
    return random_weights(folder, seed)


def edit_json(path: Path, **fields: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}, indent=2))


def hub_spec(name: str, folder: Path, **fields: Any) -> ModelSpec:
    """The kit's spec ``name`` with the stand-in in ``folder`` as its hub repository, 6 new tokens."""
    data = load_specs().models[name].model_dump()
    data.update(
        weights={"kind": "hf", "repo_id": str(folder), "trust_remote_code": True},
        generation={"max_new_tokens": 6},
    )
    data.update(fields)
    return ModelSpec.model_validate(data)
