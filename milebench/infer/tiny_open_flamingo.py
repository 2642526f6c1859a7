"""A tiny random-weight OpenFlamingo built offline by its original code, so the open-flamingo adapter
loads it exactly as it loads a release.

The folder holds what ``create_model_and_transforms`` reads: an open_clip model config of a small ViT
(``open_clip/``; the real one is open_clip's own ViT-L-14), a two-layer MPT language model in
transformers' layout (the real one is anas-awadalla/mpt-7b) with a GPT-NeoX-style tokenizer (one
``<|endoftext|>`` for BOS, EOS and unknown, no padding token, nothing added to a text, as MPT's), and
``open_flamingo.json`` with the factory's arguments (a cross-attention block every second layer; the
release has one every fourth). The factory builds the Flamingo (its Perceiver resampler and gated
cross-attention at the package's own sizes), adds ``<|endofchunk|>``, ``<image>`` and ``<PAD>`` to the
tokenizer and resizes the embeddings, and the whole state dict is saved as ``checkpoint.pt``, which the
loader loads over a fresh build. The same spec seed gives bit-identical weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import MptConfig, MptForCausalLM, PreTrainedTokenizerFast

from milebench.infer.open_flamingo_model import (
    CHECKPOINT_FILE,
    LAYOUT_FILE,
    FlamingoLayout,
    build_flamingo,
    resolved,
)
from milebench.infer.tiny import HIDDEN, IMAGE_SIZE, LAYERS, tiny_shape, train_bpe
from milebench.spec.model import ModelSpec

END_OF_TEXT = "<|endoftext|>"
VISION = "tiny-vit"
"""The open_clip model name of the tiny vision encoder (its config file's stem)."""
CROSS_ATTN_EVERY = 2
PATCHES_PER_SIDE = 4
"""The tiny tower sees 4 x 4 patches per picture; an OpenFlamingo picture is one ``<image>`` token of the
text whatever its tower gives, so the spec's ``n_tokens_per_image`` is 1."""


def open_clip_config() -> dict[str, object]:
    """An open_clip CLIP config whose vision tower sees PATCHES_PER_SIDE squared patches (its text tower
    is built by open_clip but never used by Flamingo)."""
    patch = IMAGE_SIZE // PATCHES_PER_SIDE
    heads = 2
    return {
        "embed_dim": HIDDEN,
        "vision_cfg": {
            "image_size": IMAGE_SIZE,
            "layers": LAYERS,
            "width": HIDDEN,
            "head_width": HIDDEN // heads,
            "patch_size": patch,
        },
        "text_cfg": {"context_length": 8, "vocab_size": 64, "width": HIDDEN, "heads": heads, "layers": 1},
    }


def build_tokenizer() -> PreTrainedTokenizerFast:
    """MPT's kind of tokenizer: byte-level BPE, ``<|endoftext|>`` as BOS, EOS and unknown, no pad."""
    return PreTrainedTokenizerFast(
        tokenizer_object=train_bpe((END_OF_TEXT,), None),
        bos_token=END_OF_TEXT,
        eos_token=END_OF_TEXT,
        unk_token=END_OF_TEXT,
    )


def build_tiny_open_flamingo(spec: ModelSpec, out_dir: Path) -> None:
    """Write the open_clip config, language model, tokenizer, layout and checkpoint of ``spec``."""
    shape = tiny_shape(spec, "open-flamingo")
    out_dir.mkdir(parents=True, exist_ok=True)
    config_dir = out_dir / "open_clip"
    config_dir.mkdir(exist_ok=True)
    (config_dir / f"{VISION}.json").write_text(
        json.dumps(open_clip_config(), indent=2) + "\n", encoding="utf-8"
    )
    tokenizer = build_tokenizer()
    text = MptConfig(
        d_model=HIDDEN,
        n_heads=2,
        n_layers=LAYERS,
        expansion_ratio=2,
        max_seq_len=shape.max_context_len,
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(shape.seed)
    MptForCausalLM(text).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    layout = FlamingoLayout(
        clip_vision_encoder_path=VISION,
        clip_vision_encoder_pretrained=None,
        lang_encoder_path=".",
        tokenizer_path=".",
        cross_attn_every_n_layers=CROSS_ATTN_EVERY,
        open_clip_config=f"open_clip/{VISION}.json",
    )
    (out_dir / LAYOUT_FILE).write_text(layout.model_dump_json(indent=2) + "\n", encoding="utf-8")
    torch.manual_seed(shape.seed)
    model = build_flamingo(resolved(layout, out_dir), spec.name).model
    torch.save(model.state_dict(), out_dir / CHECKPOINT_FILE)
