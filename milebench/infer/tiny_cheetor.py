"""A tiny random-weight Cheetor (LLaMA2-chat variant) in the layout its original code loads
(github.com/DCDmllm/Cheetah), so the hf-cheetor adapter loads it as it loads the real parts.

The folder is the ``llama_model`` folder (a Llama from transformers' ``LlamaConfig`` with the tiny
MiniGPT-v2's SentencePiece tokenizer files, as Llama-2-chat's) and beside it the three files the
original reads elsewhere: ``eva_vit_g.pth`` (the ViT's state dict, at the grid it runs at, as the 224-px
EVA weights run at 224 px), ``blip2_pretrained_flant5xxl.pth`` (``{"model": ...}``: the Q-Former under
``Qformer.bert.`` with one of the text parts the original drops, ``query_tokens`` and ``ln_vision``, as
LAVIS's BLIP-2 checkpoint names them) and ``cheetah_llama2_7b.pth`` (``{"model": ...}``: ``llama_proj``
and VPG-C's ``qformer_proj``, ``llm_proj`` and ``query_tokens`` under ``llama_model.model.``, random where
the original starts them at zero, so VPG-C changes the answer). ``cheetor.json`` holds the sizes the
original hard-codes (the ViT-g, ``bert-base-uncased``'s config) or takes from its configs.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch

from milebench.infer.cheetor_model import CheetorShape, QFormer, QFormerShape
from milebench.infer.minigpt_v2_model import EvaShape, EvaViT
from milebench.infer.tiny import HEADS, HIDDEN, LAYERS, tiny_shape
from milebench.infer.tiny_minigpt_v2 import EVA_FILE, TINY_EVA, write_tiny_llama
from milebench.spec.model import ModelSpec

SHAPE_FILE = "cheetor.json"
BLIP2_FILE = "blip2_pretrained_flant5xxl.pth"
CHECKPOINT_FILE = "cheetah_llama2_7b.pth"
TINY_GRID = 4
"""Patches per side of the tiny ViT."""
UPDATE_LAYER = 1
"""VPG-C before the tiny Llama's second (last) layer, as the real one before layer 16 of 32."""
TINY_QFORMER = QFormerShape(
    hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=2 * HIDDEN
)


def tiny_cheetor_shape(n_tokens_per_image: int) -> CheetorShape:
    return CheetorShape(
        eva=TINY_EVA,
        image_size=TINY_GRID * TINY_EVA.patch_size,
        qformer=TINY_QFORMER,
        num_query_token=n_tokens_per_image,
        update_layer=UPDATE_LAYER,
    )


def perturbed(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The module's state with its LayerNorms and zero-started parameters made random too."""
    for name, param in module.named_parameters():
        if "LayerNorm" in name or name.endswith("_bias") or name in ("cls_token", "pos_embed"):
            torch.nn.init.normal_(param, mean=1.0 if name.endswith("LayerNorm.weight") else 0.0, std=0.1)
    return module.state_dict()


def build_tiny_cheetor(spec: ModelSpec, out_dir: Path) -> None:
    """Write the tiny Cheetor of ``spec`` into ``out_dir``."""
    shape = tiny_shape(spec, "cheetor")
    cheetor = tiny_cheetor_shape(shape.n_tokens_per_image)
    write_tiny_llama(shape, out_dir)
    eva = EvaViT(TINY_EVA, cheetor.image_size)
    torch.save(perturbed(eva), out_dir / EVA_FILE)
    width, queries = TINY_QFORMER.hidden_size, cheetor.num_query_token
    qformer = {f"Qformer.{k}": v for k, v in perturbed(QFormer(TINY_QFORMER, TINY_EVA.embed_dim)).items()}
    blip2 = {
        **qformer,
        "Qformer.bert.embeddings.word_embeddings.weight": torch.randn(64, width) * 0.02,
        "query_tokens": torch.randn(1, queries, width) * 0.5,
        "ln_vision.weight": 1 + torch.randn(TINY_EVA.embed_dim) * 0.1,
        "ln_vision.bias": torch.randn(TINY_EVA.embed_dim) * 0.1,
    }
    torch.save({"model": blip2}, out_dir / BLIP2_FILE)
    state = {
        "llama_proj.weight": torch.randn(HIDDEN, width) * 0.1,
        "llama_proj.bias": torch.randn(HIDDEN) * 0.02,
        "llama_model.model.qformer_proj.weight": torch.randn(width, HIDDEN) * 0.1,
        "llama_model.model.qformer_proj.bias": torch.randn(width) * 0.02,
        "llama_model.model.llm_proj.weight": torch.randn(HIDDEN, width) * 0.1,
        "llama_model.model.llm_proj.bias": torch.randn(HIDDEN) * 0.02,
        "llama_model.model.query_tokens": torch.randn(1, queries, width) * 0.5,
    }
    torch.save({"model": state}, out_dir / CHECKPOINT_FILE)
    (out_dir / SHAPE_FILE).write_text(json.dumps(asdict(cheetor), indent=2) + "\n", encoding="utf-8")


def read_shape(folder: Path) -> CheetorShape:
    """The sizes a tiny checkpoint states; the real model's are the original's constants."""
    path = folder / SHAPE_FILE
    if not path.is_file():
        return CheetorShape()
    saved = json.loads(path.read_text(encoding="utf-8"))
    return CheetorShape(
        eva=EvaShape(**saved["eva"]),
        image_size=saved["image_size"],
        qformer=QFormerShape(**saved["qformer"]),
        num_query_token=saved["num_query_token"],
        update_layer=saved["update_layer"],
    )
