"""A tiny random-weight MiniGPT-v2 in the layout its original code loads (github.com/Vision-CAIR/MiniGPT-4),
so the hf-minigpt-v2 adapter loads it as it loads the real parts.

The folder is the ``llama_model`` folder (a Llama from transformers' ``LlamaConfig`` with Llama-2's
tokenizer files: a SentencePiece ``tokenizer.model`` with byte fallback, as the original's slow
``LlamaTokenizer`` reads it, and the ``tokenizer.json`` transformers converts from it, in the form of
the hub's Llama-2 files, which put the word-start marker on every text piece) and beside it the two
files the original fetches elsewhere: ``eva_vit_g.pth`` (the ViT's state dict, saved at a coarser grid
than it runs at, as the 224-px EVA weights run at 448 px, so its position embeddings are interpolated)
and ``minigptv2_checkpoint.pth`` (``{"model": ...}`` with ``llama_proj``, ``ln_vision`` and random LoRA
pairs under peft 0.2.0's names). ``minigpt_v2.json`` holds the sizes the original hard-codes.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from milebench.infer.adapter import AdapterError
from milebench.infer.minigpt_v2_model import LORA_KEY, EvaShape, EvaViT, MiniGPTv2Shape
from milebench.infer.tiny import CORPUS, HEADS, HIDDEN, LAYERS, TinyShape, tiny_shape
from milebench.spec.model import ModelSpec

SHAPE_FILE = "minigpt_v2.json"
EVA_FILE = "eva_vit_g.pth"
CHECKPOINT_FILE = "minigptv2_checkpoint.pth"
TOKENIZER_MODEL = "tokenizer.model"
SPM_VOCAB = 420
"""Byte fallback takes 256 pieces; the rest are merges learnt from the corpus."""
TINY_EVA = EvaShape(embed_dim=HIDDEN, depth=LAYERS, num_heads=HEADS)
PRETRAIN_GRID = 4
"""Patches per side of the saved ViT weights (the real ones: 16, run at 32)."""
LORA_R = 4


def train_sentencepiece() -> bytes:
    """A Llama-style SentencePiece BPE model (byte fallback, split digits, ids 0-2 for unk, BOS, EOS)
    trained on the kit's corpus; one thread, so the same bytes every time."""
    try:
        import sentencepiece as spm
    except ImportError as err:
        raise AdapterError("the tiny MiniGPT-v2 needs sentencepiece: pip install -e '.[minigpt-v2]'") from err
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 3),
        model_writer=model,
        vocab_size=SPM_VOCAB,
        model_type="bpe",
        byte_fallback=True,
        split_digits=True,
        character_coverage=1.0,
        num_threads=1,
        add_dummy_prefix=True,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        minloglevel=2,
    )
    return model.getvalue()


def tiny_llama_config(tokenizer: Any, max_context_len: int) -> LlamaConfig:
    """The tiny Llama's config for a SentencePiece tokenizer built by :func:`train_sentencepiece`."""
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        max_position_embeddings=max_context_len,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def tiny_eva(image_size: int) -> EvaViT:
    """The tiny EVA ViT with random biases, class token and positions (which start at zero)."""
    eva = EvaViT(TINY_EVA, image_size)
    for name, param in eva.named_parameters():
        if name.endswith("_bias") or name in ("cls_token", "pos_embed"):
            torch.nn.init.normal_(param, std=0.02)
    return eva


def tiny_minigpt_shape(n_tokens_per_image: int) -> MiniGPTv2Shape:
    """Sizes whose picture gives ``n_tokens_per_image`` tokens (four patches each, a square grid)."""
    side = round((4 * n_tokens_per_image) ** 0.5)
    if side * side != 4 * n_tokens_per_image or side <= PRETRAIN_GRID:
        raise AdapterError(
            f"n_tokens_per_image {n_tokens_per_image}: four times it must be a square grid wider than "
            f"{PRETRAIN_GRID} patches"
        )
    return MiniGPTv2Shape(eva=TINY_EVA, image_size=side * TINY_EVA.patch_size, lora_r=LORA_R)


def write_tiny_llama(shape: TinyShape, out_dir: Path) -> None:
    """The ``llama_model`` folder of a tiny MiniGPT-4 descendant: the SentencePiece tokenizer files and a
    seeded random Llama."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / TOKENIZER_MODEL).write_bytes(train_sentencepiece())
    # legacy: the word-start marker on every text piece, also after a special token, as Llama-2's
    # tokenizer.json on the hub and the original's slow tokenizer have it.
    tokenizer = AutoTokenizer.from_pretrained(out_dir, legacy=True)
    tokenizer.save_pretrained(out_dir)
    torch.manual_seed(shape.seed)
    LlamaForCausalLM(tiny_llama_config(tokenizer, shape.max_context_len)).save_pretrained(out_dir)


def build_tiny_minigpt_v2(spec: ModelSpec, out_dir: Path) -> None:
    """Write the tiny MiniGPT-v2 of ``spec`` into ``out_dir``."""
    shape = tiny_shape(spec, "minigpt-v2")
    minigpt = tiny_minigpt_shape(shape.n_tokens_per_image)
    write_tiny_llama(shape, out_dir)
    eva = tiny_eva(PRETRAIN_GRID * TINY_EVA.patch_size)
    torch.save(eva.state_dict(), out_dir / EVA_FILE)
    width = TINY_EVA.embed_dim
    state = {
        "llama_proj.weight": torch.randn(HIDDEN, width * 4) * 0.05,
        "llama_proj.bias": torch.randn(HIDDEN) * 0.02,
        "ln_vision.weight": 1 + torch.randn(width) * 0.1,
        "ln_vision.bias": torch.randn(width) * 0.1,
    }
    for layer in range(LAYERS):
        for target in minigpt.lora_targets:
            key = f"{LORA_KEY}model.layers.{layer}.self_attn.{target}"
            state[f"{key}.lora_A.weight"] = torch.randn(LORA_R, HIDDEN) * 0.1
            state[f"{key}.lora_B.weight"] = torch.randn(HIDDEN, LORA_R) * 0.1
    torch.save({"model": state}, out_dir / CHECKPOINT_FILE)
    sizes = {**asdict(minigpt), "pretrain_image_size": PRETRAIN_GRID * TINY_EVA.patch_size}
    (out_dir / SHAPE_FILE).write_text(json.dumps(sizes, indent=2) + "\n", encoding="utf-8")


def read_shape(folder: Path) -> MiniGPTv2Shape:
    """The sizes a tiny checkpoint states; the real model's are the original's constants."""
    path = folder / SHAPE_FILE
    if not path.is_file():
        return MiniGPTv2Shape()
    saved = json.loads(path.read_text(encoding="utf-8"))
    return MiniGPTv2Shape(
        eva=EvaShape(**saved["eva"]),
        image_size=saved["image_size"],
        lora_r=saved["lora_r"],
        lora_alpha=saved["lora_alpha"],
        lora_targets=tuple(saved["lora_targets"]),
    )
