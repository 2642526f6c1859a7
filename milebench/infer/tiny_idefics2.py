"""A tiny random-weight Idefics2, written in the layout of a hub checkpoint (model, processor with its image
processor, tokenizer and an Idefics2-style chat template), so the hf-idefics2 adapter loads it exactly
as it loads HuggingFaceM4/idefics2-8b or TIGER-Lab/Mantis-8B-Idefics2.

Images keep their aspect ratio (longest edge at most 32 pixels, shortest at least 16, 8x8 patches) and
a perceiver resamples each one to ``n_tokens_per_image`` latents, so every image costs exactly that
many image tokens between two boundary tokens, whatever its size. Image splitting is off, as in the
Idefics2 image processor's default.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import (
    Idefics2Config,
    Idefics2ForConditionalGeneration,
    Idefics2ImageProcessorPil,
    Idefics2Processor,
    PreTrainedTokenizerFast,
)

from milebench.infer.tiny import HEADS, HIDDEN, LAYERS, text_fields, tiny_shape, token_id, train_bpe
from milebench.spec.model import ModelSpec

UNK, BOS, EOS = "<unk>", "<s>", "</s>"
IMAGE_BOUNDARY, IMAGE_TOKEN, END_OF_UTTERANCE = "<fake_token_around_image>", "<image>", "<end_of_utterance>"
SPECIAL_TOKENS = (UNK, BOS, EOS, IMAGE_BOUNDARY, IMAGE_TOKEN, END_OF_UTTERANCE)
PATCH = 8
LONGEST_EDGE = 32
SHORTEST_EDGE = 16
INIT_RANGE = 0.2
"""Ten times the default weight spread: at the default the answers barely depend on the input."""

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'].capitalize() }}"
    "{% if message['content'][0]['type'] == 'image' %}{{ ':' }}{% else %}{{ ': ' }}{% endif %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}{{ '<image>' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
"""Idefics2's chat format: parts in order, each turn closed by the end-of-utterance token."""


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Mistral-style special tokens and Idefics2's image tokens around the trained BPE."""
    return PreTrainedTokenizerFast(
        tokenizer_object=train_bpe(SPECIAL_TOKENS, UNK),
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        pad_token=UNK,
        padding_side="left",
        extra_special_tokens={
            "image_token": IMAGE_TOKEN,
            "image_boundary_token": IMAGE_BOUNDARY,
            "end_of_utterance_token": END_OF_UTTERANCE,
        },
    )


def build_tiny_idefics2(spec: ModelSpec, out_dir: Path) -> None:
    """Write model and processor of ``spec`` into ``out_dir`` (``from_pretrained`` loads it)."""
    shape = tiny_shape(spec, "idefics2")
    tokenizer = build_tokenizer()
    config = Idefics2Config(
        text_config={
            "model_type": "mistral",
            **text_fields(tokenizer, shape.max_context_len),
            "initializer_range": INIT_RANGE,
        },
        vision_config={
            "hidden_size": HIDDEN,
            "intermediate_size": 2 * HIDDEN,
            "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS,
            "image_size": LONGEST_EDGE,
            "patch_size": PATCH,
            "initializer_range": INIT_RANGE,
        },
        perceiver_config={
            "hidden_size": HIDDEN,
            "resampler_n_latents": shape.n_tokens_per_image,
            "resampler_depth": LAYERS,
            "resampler_n_heads": HEADS,
            "resampler_head_dim": HIDDEN // HEADS,
            "num_key_value_heads": HEADS,
            "initializer_range": INIT_RANGE,
        },
        image_token_id=token_id(tokenizer, IMAGE_TOKEN),
    )
    torch.manual_seed(shape.seed)
    model = Idefics2ForConditionalGeneration(config)
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, token_id(tokenizer, END_OF_UTTERANCE)]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    processor = Idefics2Processor(
        image_processor=Idefics2ImageProcessorPil(
            size={"shortest_edge": SHORTEST_EDGE, "longest_edge": LONGEST_EDGE}, do_image_splitting=False
        ),
        tokenizer=tokenizer,
        image_seq_len=shape.n_tokens_per_image,
        chat_template=CHAT_TEMPLATE,
    )
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
