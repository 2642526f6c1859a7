"""A tiny random-weight LWM in the files the original code reads (github.com/LargeWorldModel/LWM at 59d4dbe,
as ``lwm/vision_chat.py`` loads LWM-Chat's release): ``params`` (tux's streaming msgpack of
``FlaxVideoLLaMAForCausalLM``'s parameters, layers stacked as ``scan_layers=True`` keeps them),
``config.json`` (``VideoLLaMAConfig``'s own JSON, which the original reads with
``load_llama_config='json::...'``), ``vqgan`` (the pickled parameter tree ``VQGAN`` unpickles) with
``vqgan_config.json`` (the tiny VQGAN's sizes; the release's VQGAN has ``VQGANConfig``'s defaults and
none), and ``tokenizer.model``, the tiny family's SentencePiece model (ids 0-2 unk, BOS, EOS as LLaMA's).

The VQGAN keeps what fixes LWM's token layout (256 x 256 frames, 16 x 16 codes, 8192 codebook entries of
64 dimensions) at a tiny width; its codebook is drawn from a unit normal, so the nearest entry of each
position is far ahead of the next and float rounding picks the same code in JAX and torch.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from milebench.infer.lwm_model import VQGAN_DEFAULTS, write_streaming_params
from milebench.infer.tiny import HEADS, HIDDEN, LAYERS, tiny_shape
from milebench.infer.tiny_minigpt_v2 import SPM_VOCAB, TOKENIZER_MODEL, train_sentencepiece
from milebench.spec.model import ModelSpec

PARAMS = "params"
VQGAN = "vqgan"
VQGAN_CONFIG = "vqgan_config.json"
CONFIG = "config.json"
VISION_VOCAB = 8448
"""``VideoLLaMAConfig.vision_vocab_size``: 8192 codes and 256 more (``<eof>``, ``<eov>``, ...)."""
INTERMEDIATE = 64
TINY_VQGAN: dict[str, Any] = {
    **VQGAN_DEFAULTS,
    "hidden_channels": 32,
    "channel_mult": [1, 1, 1, 1, 1],
    "num_res_blocks": 0,
}
"""Five levels (four halvings: 256 px to 16 x 16 codes) of 32 channels (GroupNorm's 32 groups), no residual
block but the middle two, so 256-px frames encode quickly."""
STD = 0.02
"""``initializer_range``: the original's normal init of every kernel and table."""


def lwm_config(max_context_len: int) -> dict[str, Any]:
    """``VideoLLaMAConfig``'s fields of the tiny model (``sample_mode='text'`` as ``run_vision_chat.sh``)."""
    return {
        "vocab_size": SPM_VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "max_sequence_length": max_context_len,
        "rms_norm_eps": 1e-6,
        "initializer_range": STD,
        "use_cache": True,
        "tie_word_embeddings": False,
        "theta": 10000,
        "vision_vocab_size": VISION_VOCAB,
        "tie_vision_embeddings": False,
        "sample_mode": "text",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "model_type": "video_llama",
    }


def lm_params(rng: np.random.Generator, config: dict[str, Any]) -> dict[tuple[str, ...], np.ndarray]:
    """``FlaxVideoLLaMAForCausalLMModule``'s parameters, flat, in its key paths."""
    h, inner, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * STD).astype(np.float32)

    scan = ("transformer", "h", "scan_decoder")
    params: dict[tuple[str, ...], np.ndarray] = {
        ("transformer", "vte", "embedding"): normal(config["vision_vocab_size"], h),
        ("transformer", "wte", "embedding"): normal(config["vocab_size"], h),
    }
    for name in ("wq", "wk", "wv", "wo"):
        params[(*scan, "attention", name, "kernel")] = normal(layers, h, h)
    params[(*scan, "feed_forward", "w1", "kernel")] = normal(layers, h, inner)
    params[(*scan, "feed_forward", "w2", "kernel")] = normal(layers, inner, h)
    params[(*scan, "feed_forward", "w3", "kernel")] = normal(layers, h, inner)
    # Norm scales off one, so a wrong reading of them shows.
    params[(*scan, "attention_norm", "kernel")] = 1 + normal(layers, h) * 10
    params[(*scan, "ffn_norm", "kernel")] = 1 + normal(layers, h) * 10
    params[("transformer", "ln_f", "kernel")] = 1 + normal(h) * 10
    params[("vision_head", "kernel")] = normal(h, config["vision_vocab_size"])
    params[("lm_head", "kernel")] = normal(h, config["vocab_size"])
    return params


def vqgan_params(rng: np.random.Generator, sizes: dict[str, Any]) -> dict[str, Any]:
    """The encoder half of ``VQGANModel``'s parameter tree (``encode`` reads no other), flax names."""

    def conv(k: int, c_in: int, c_out: int) -> dict[str, np.ndarray]:
        scale = 1 / np.sqrt(k * k * c_in)
        kernel = rng.standard_normal((k, k, c_in, c_out)) * scale
        return {
            "kernel": kernel.astype(np.float32),
            "bias": (rng.standard_normal(c_out) * 0.1).astype(np.float32),
        }

    def norm(c: int) -> dict[str, np.ndarray]:
        scale = 1 + rng.standard_normal(c) * 0.1
        return {"scale": scale.astype(np.float32), "bias": (rng.standard_normal(c) * 0.1).astype(np.float32)}

    def resnet(c_in: int, c_out: int) -> dict[str, Any]:
        block = {"GroupNorm_0": norm(c_in), "Conv_0": conv(3, c_in, c_out)}
        block |= {"GroupNorm_1": norm(c_out), "Conv_1": conv(3, c_out, c_out)}
        return block | ({"Conv_2": conv(1, c_in, c_out)} if c_in != c_out else {})

    width = sizes["hidden_channels"]
    encoder: dict[str, Any] = {"Conv_0": conv(3, sizes["num_channels"], width)}
    channels = width
    mults = sizes["channel_mult"]
    for level, mult in enumerate(mults):
        block: dict[str, Any] = {}
        for n in range(sizes["num_res_blocks"]):
            block[f"ResnetBlock_{n}"] = resnet(channels, width * mult)
            channels = width * mult
        if level != len(mults) - 1:
            block["Downsample_0"] = {"Conv_0": conv(3, channels, channels)}
        encoder[f"DownsamplingBlock_{level}"] = block
    encoder["MidBlock_0"] = {
        "ResnetBlock_0": resnet(channels, channels),
        "ResnetBlock_1": resnet(channels, channels),
    }
    encoder["GroupNorm_0"] = norm(channels)
    encoder["Conv_1"] = conv(3, channels, sizes["z_channels"])
    codebook = rng.standard_normal((sizes["num_embeddings"], sizes["quantized_embed_dim"]))
    return {
        "encoder": encoder,
        "quant_conv": conv(1, sizes["z_channels"], sizes["quantized_embed_dim"]),
        "quantize": {"embeddings": codebook.astype(np.float32)},
    }


def build_tiny_lwm(spec: ModelSpec, out_dir: Path) -> None:
    """Write params, config, VQGAN and tokenizer of ``spec`` into ``out_dir`` in LWM's files."""
    shape = tiny_shape(spec, "lwm")
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(shape.seed)
    config = lwm_config(shape.max_context_len)
    write_streaming_params(lm_params(rng, config), out_dir / PARAMS)
    (out_dir / VQGAN).write_bytes(pickle.dumps(vqgan_params(rng, TINY_VQGAN), protocol=4))
    (out_dir / VQGAN_CONFIG).write_text(json.dumps(TINY_VQGAN, indent=2, sort_keys=True) + "\n", "utf-8")
    (out_dir / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", "utf-8")
    (out_dir / TOKENIZER_MODEL).write_bytes(train_sentencepiece())
