"""A tiny random-weight VideoChat2 in the layout its original code loads (github.com/OpenGVLab/Ask-Anything,
``video_chat2``), so the hf-videochat2 adapter loads it as it loads the real parts.

The folder is the ``llama_model_path`` folder (a Llama from transformers' ``LlamaConfig`` with the tiny
MiniGPT-v2's SentencePiece tokenizer files, as Vicuna's) and beside it the files the original reads
elsewhere: ``umt_l16_qformer.pth`` (``vit_blip_model_path``: the UMT ViT under ``vision_encoder.``,
``vision_layernorm``, the Q-Former under ``qformer.`` with its word embeddings resized to the BERT
tokenizer, ``query_tokens``), ``videochat2_7b_stage3.pth`` (``{"model": ...}``: ``llama_proj``,
``extra_query_tokens``, the LoRA pairs under peft's names and stage-3 values of some ViT and Q-Former
weights, loaded over the first file as the demo loads it) and ``bert-base-uncased-vocab.txt`` (the
Q-Former's BERT vocabulary, a few words). ``videochat2.json`` holds the sizes the original takes from its
configs or from ``bert-base-uncased``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import torch

from milebench.infer.cheetor_model import QFormerShape
from milebench.infer.tiny import HIDDEN, LAYERS, tiny_shape
from milebench.infer.tiny_cheetor import TINY_QFORMER, perturbed
from milebench.infer.tiny_minigpt_v2 import write_tiny_llama
from milebench.infer.videochat2_model import LORA_PREFIX, TextQFormer, UmtShape, UmtViT, VideoChat2Shape
from milebench.spec.model import ModelSpec

SHAPE_FILE = "videochat2.json"
UMT_FILE = "umt_l16_qformer.pth"
CHECKPOINT_FILE = "videochat2_7b_stage3.pth"
BERT_VOCAB_FILE = "bert-base-uncased-vocab.txt"
BERT_WORDS = (
    *("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
    *("observe", "the", "image", "and", "answer", "question", ".", "watch", "video"),
)
"""Enough of BERT's vocabulary for the instructions ``Chat`` gives the Q-Former."""
TINY_UMT = UmtShape(patch_size=56, embed_dim=HIDDEN, depth=3, num_heads=2)
"""Four patches a side at 224 px; with ``return_index`` -2, two blocks run."""
TINY_QUERIES = 4
"""``num_query_token``; the extra queries make up the rest of the spec's tokens per picture."""
LORA_R = 4
LORA_ALPHA = 8


def tiny_videochat2_shape(n_tokens_per_image: int) -> VideoChat2Shape:
    return VideoChat2Shape(
        vit=TINY_UMT,
        qformer=replace(TINY_QFORMER, num_hidden_layers=LAYERS),
        qformer_vocab=len(BERT_WORDS) + 1,
        num_query_token=TINY_QUERIES,
        extra_num_query_token=n_tokens_per_image - TINY_QUERIES,
        lora_r=LORA_R,
        lora_alpha=LORA_ALPHA,
    )


def build_tiny_videochat2(spec: ModelSpec, out_dir: Path) -> None:
    """Write the tiny VideoChat2 of ``spec`` into ``out_dir``."""
    shape = tiny_shape(spec, "videochat2")
    model = tiny_videochat2_shape(shape.n_tokens_per_image)
    write_tiny_llama(shape, out_dir)
    (out_dir / BERT_VOCAB_FILE).write_text("".join(f"{w}\n" for w in BERT_WORDS), encoding="utf-8")
    width, embed_dim = model.qformer.hidden_size, model.vit.embed_dim
    vision = {f"vision_encoder.{k}": v for k, v in perturbed(UmtViT(model.vit)).items()}
    qformer = {f"qformer.{k}": v for k, v in perturbed(TextQFormer(model)).items()}
    umt = {
        **vision,
        "vision_layernorm.weight": 1 + torch.randn(embed_dim) * 0.1,
        "vision_layernorm.bias": torch.randn(embed_dim) * 0.1,
        **qformer,
        "query_tokens": torch.randn(1, model.num_query_token, width) * 0.5,
    }
    torch.save(umt, out_dir / UMT_FILE)
    stage3 = {
        "llama_proj.weight": torch.randn(HIDDEN, width) * 0.1,
        "llama_proj.bias": torch.randn(HIDDEN) * 0.02,
        "extra_query_tokens": torch.randn(1, model.extra_num_query_token, width) * 0.5,
        "query_tokens": torch.randn(1, model.num_query_token, width) * 0.5,
        "vision_layernorm.bias": torch.randn(embed_dim) * 0.1,
        "qformer.bert.embeddings.LayerNorm.bias": torch.randn(width) * 0.1,
    }
    for layer in range(LAYERS):
        for target in model.lora_targets:
            key = f"{LORA_PREFIX}model.layers.{layer}.self_attn.{target}"
            stage3[f"{key}.lora_A.default.weight"] = torch.randn(LORA_R, HIDDEN) * 0.1
            stage3[f"{key}.lora_B.default.weight"] = torch.randn(HIDDEN, LORA_R) * 0.1
    torch.save({"model": stage3}, out_dir / CHECKPOINT_FILE)
    (out_dir / SHAPE_FILE).write_text(json.dumps(asdict(model), indent=2) + "\n", encoding="utf-8")


def read_shape(folder: Path) -> VideoChat2Shape:
    """The sizes a tiny checkpoint states; the real model's are the original's constants."""
    path = folder / SHAPE_FILE
    if not path.is_file():
        return VideoChat2Shape()
    saved = json.loads(path.read_text(encoding="utf-8"))
    return VideoChat2Shape(
        vit=UmtShape(**saved["vit"]),
        qformer=QFormerShape(**saved["qformer"]),
        qformer_vocab=saved["qformer_vocab"],
        qformer_positions=saved["qformer_positions"],
        num_query_token=saved["num_query_token"],
        extra_num_query_token=saved["extra_num_query_token"],
        lora_r=saved["lora_r"],
        lora_alpha=saved["lora_alpha"],
        lora_targets=tuple(saved["lora_targets"]),
    )
