"""Tiny random-weight checkpoints built offline, so smoke runs and tests exercise the real HF code path.

Everything is derived from the model spec and code: a byte-level BPE tokenizer trained on a fixed
corpus and a two-layer model of the spec's family. The LLaVA lives here (a 32x32 CLIP vision tower with
8x8 patches: 16 patches, the CLS feature dropped, and a Llama); the Qwen2-VL in ``tiny_qwen2_vl``, the
LLaVA-NeXT in ``tiny_llava_next``, the Idefics2 in ``tiny_idefics2``, the Yi-VL in ``tiny_yi_vl``, the
Mantis in ``tiny_mantis``. The same spec seed gives bit-identical weights.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    CLIPImageProcessor,
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    PretrainedConfig,
    PreTrainedTokenizerFast,
)

from milebench.infer.adapter import AdapterError
from milebench.spec.adapters import tiny_families
from milebench.spec.model import ModelSpec, TinyWeights

IMAGE_TOKEN = "<image>"
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>", IMAGE_TOKEN)
VOCAB_SIZE = 400
IMAGE_SIZE = 32
HIDDEN = 32
LAYERS = 2
HEADS = 2
FEATURE_STRATEGY: Final = "default"
"""Drop the CLS feature, so the image token count is exactly the patch count."""

CORPUS = (
    "USER: Based on the images, answer the question. ASSISTANT: The answer is B.",
    "Choice list: A. yes B. no C. maybe D. not sure Your answer is: A",
    "Look at the picture and describe what changed between the two frames.",
    "What is the person doing in the video? The person is opening a door and walking out.",
    "Which object did the person take after putting down the cup? The bag, the phone or the book.",
    "There is a red cube to the left of a small blue sphere on the table.",
    "Find the image that matches the query image from the list of candidates below.",
    "The slide shows a table with numbers, dates and names of cities in the world.",
    "Image 1 Image 2 Image 3 Image 4 the first second third last one of these pictures",
    "The car turns right at the crossing; the truck goes straight ahead and stops.",
)


LLAVA_HF_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] != 'system' %}{{ message['role'].upper() + ': ' }}{% endif %}"
    "{% for part in message['content'] if part['type'] == 'image' %}{{ '<image>\n' }}{% endfor %}"
    "{% for part in message['content'] if part['type'] == 'text' %}{{ part['text'] + ' ' }}{% endfor %}"
    "{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)
"""The llava-hf Vicuna format, which puts every image part before all text parts (the adapter keeps
MileBench's interleaving by sending image tokens inside the text)."""


def text_fields(
    tokenizer: PreTrainedTokenizerFast, max_context_len: int, heads: int = HEADS
) -> dict[str, Any]:
    """The language model's shape, shared by every tiny family: two layers of width HIDDEN."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": HIDDEN,
        "intermediate_size": 2 * HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "max_position_embeddings": max_context_len,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }


@dataclass(frozen=True)
class TinyShape:
    """What a tiny build takes from its model spec."""

    seed: int
    max_context_len: int
    n_tokens_per_image: int


def tiny_shape(spec: ModelSpec, family: str) -> TinyShape:
    """The spec's tiny build settings, checked to be of ``family`` and complete."""
    weights = spec.weights
    if not isinstance(weights, TinyWeights) or weights.family != family:
        raise AdapterError(f"model spec {spec.name!r}: weights are not kind tiny, family {family}")
    if spec.n_tokens_per_image is None or spec.max_context_len is None:
        raise AdapterError(
            f"model spec {spec.name!r}: tiny models need max_context_len and n_tokens_per_image"
        )
    return TinyShape(weights.seed, spec.max_context_len, spec.n_tokens_per_image)


BUILDERS: dict[str, str] = {family: tiny.builder for family, tiny in tiny_families().items()}
"""The builder of each tiny family, as the adapter modules declare them; imported only when used."""


def as_released(weights_file: Path, tower: str | None) -> None:
    """Rewrite a saved weights file as the checkpoints of the ported models were released: every float
    weight a bfloat16 value (their original code loads them in bfloat16, which then changes nothing) and
    the CLIP tower's weights (those named ``tower...``) under ``vision_model.``, the names transformers
    before 5 gave a ``CLIPVisionModel`` (transformers 5 drops the prefix and reads both)."""
    out = {}
    for name, tensor in load_file(weights_file).items():
        rest = name.removeprefix(tower) if tower is not None and name.startswith(tower) else None
        key = (
            f"{tower}vision_model.{rest}"
            if rest is not None and not rest.startswith("vision_model.")
            else name
        )
        out[key] = tensor.to(torch.bfloat16).to(tensor.dtype) if tensor.is_floating_point() else tensor
    save_file(out, weights_file, metadata={"format": "pt"})


def build_tiny(spec: ModelSpec, out_dir: Path) -> None:
    """Write the tiny checkpoint of ``spec``'s family into ``out_dir``."""
    weights = spec.weights
    if not isinstance(weights, TinyWeights):
        raise AdapterError(f"model spec {spec.name!r}: weights are {weights.kind!r}, not tiny")
    module_name, function = BUILDERS[weights.family].split(":")
    getattr(importlib.import_module(module_name), function)(spec, out_dir)


def train_bpe(special_tokens: tuple[str, ...], unk_token: str | None) -> Tokenizer:
    """Byte-level BPE trained on CORPUS: any text encodes without unknown tokens and decodes back
    unchanged; the special tokens take the first ids, in order."""
    tokenizer = Tokenizer(models.BPE(unk_token=unk_token))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return tokenizer


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The tiny LLaVA's tokenizer: Llama-style special tokens around the trained BPE."""
    return PreTrainedTokenizerFast(
        tokenizer_object=train_bpe(SPECIAL_TOKENS, "<unk>"),
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        padding_side="left",
        extra_special_tokens={"image_token": IMAGE_TOKEN},
    )


def token_id(tokenizer: PreTrainedTokenizerFast, token: str) -> int:
    """The id of one token: ``convert_tokens_to_ids`` is typed for a list of tokens as well."""
    return tokenizer.convert_tokens_to_ids(token)  # type: ignore[return-value]  # one token gives one id


def vision_config(n_tokens_per_image: int) -> CLIPVisionConfig:
    """A vision tower with ``n_tokens_per_image`` patches (side x side patches of IMAGE_SIZE pixels)."""
    side = math.isqrt(n_tokens_per_image)
    if side * side != n_tokens_per_image or IMAGE_SIZE % side:
        raise AdapterError(
            f"n_tokens_per_image {n_tokens_per_image} must be a square whose root divides {IMAGE_SIZE}"
        )
    return CLIPVisionConfig(
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        image_size=IMAGE_SIZE,
        patch_size=IMAGE_SIZE // side,
        projection_dim=HIDDEN,
    )


VLLM_HEADS = 1
"""The tiny LLaVA's language model has one attention head as wide as the model: vLLM's CPU attention takes
no head size below 32, and its ``vllm`` variant must load the same checkpoint as the transformers run."""


def build_tiny_llava(spec: ModelSpec, out_dir: Path) -> None:
    """Write model and processor of ``spec`` into ``out_dir`` (``from_pretrained`` loads it), as llava-hf
    released its checkpoints (the CLIP tower under ``vision_model.``, the names vLLM maps) and with a
    language model vLLM's CPU build runs, so both backends answer from one checkpoint."""
    save_tiny_llava(tiny_shape(spec, "llava"), LlamaConfig, LLAVA_HF_CHAT_TEMPLATE, out_dir, VLLM_HEADS)
    as_released(out_dir / "model.safetensors", "vision_tower.")


def save_tiny_llava(
    shape: TinyShape,
    text_class: type[PretrainedConfig],
    chat_template: str | None,
    out_dir: Path,
    heads: int = HEADS,
) -> None:
    """A llava-hf layout checkpoint of ``shape`` whose language model is of ``text_class``'s family."""
    tokenizer = build_tokenizer()
    vision = vision_config(shape.n_tokens_per_image)
    text = text_class(**text_fields(tokenizer, shape.max_context_len, heads))
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=token_id(tokenizer, IMAGE_TOKEN),
        image_seq_length=shape.n_tokens_per_image,
        vision_feature_select_strategy=FEATURE_STRATEGY,
        vision_feature_layer=-1,
    )
    torch.manual_seed(shape.seed)
    model = LlavaForConditionalGeneration(config)
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
        ),
        tokenizer=tokenizer,
        patch_size=vision.patch_size,
        vision_feature_select_strategy=FEATURE_STRATEGY,
        num_additional_image_tokens=1,
        image_token=IMAGE_TOKEN,
        chat_template=chat_template,
    )
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    # Hub checkpoints also carry the image processor on its own, which transformers before 5 reads.
    processor.image_processor.save_pretrained(out_dir)
