"""LLaVA-family models through ``transformers`` (hub checkpoints and the kit's tiny checkpoints).

Prompting follows the official LLaVA worker where it matters for answers: ``<ImageHere><ImageHere>``
becomes ``<ImageHere>\\n<ImageHere>\\n`` (its CLEVR-Change fix), every placeholder becomes the
processor's image token in place, the answer is decoded from the new tokens only and stripped.

The spec's execution picks the turn format: ``llava_llama_2`` (the official worker's), the llava-hf
``USER: ... ASSISTANT:`` format, or the processor's chat template. The llava-hf chat templates put every
image part before all text parts, which would move MileBench's interleaved images to the front; so the
prompt reaches the template as one text part with the image tokens already in place.

With ``per_chunk`` tokenization the ids are built as LLaVA's ``tokenizer_image_token`` builds them,
and each image id is repeated to the image's feature count where this transformers expects the
expanded form. With ``per_sample`` decoding each sample of a batch is generated alone, unpadded.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Unpack

import torch
from PIL import Image
from transformers import BatchFeature

from milebench.infer.adapter import AdapterError, AdapterOptions
from milebench.infer.chunk_tokens import per_chunk_ids
from milebench.infer.hf_image_text_to_text import HfImageTextToTextAdapter
from milebench.infer.records import IMAGE_PLACEHOLDER, ModelInput
from milebench.infer.registry import template_renderer
from milebench.paths import ModelFolders
from milebench.spec.execution import CHAT_TEMPLATE, Decoding, Tokenization
from milebench.spec.model import ModelSpec

ADAPTER = {
    "kind": "hf-llava",
    "does": "generate",
    "entry": "HfLlavaAdapter",
    "execution": "generic",
    "tiny": {"family": "llava", "builder": "milebench.infer.tiny:build_tiny_llava"},
}
"""What this module runs (milebench.spec.adapters)."""

ADJACENT_IMAGES = IMAGE_PLACEHOLDER * 2
ADJACENT_IMAGES_SPLIT = f"{IMAGE_PLACEHOLDER}\n{IMAGE_PLACEHOLDER}\n"
LLAVA_IMAGE_TOKEN = "<image>"
"""The image token of processors that do not name theirs (transformers before 4.4x)."""


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Input ids and attention mask of rows padded on the left to the longest."""
    width = max(len(row) for row in rows)
    ids = torch.tensor([[pad_id] * (width - len(row)) + list(row) for row in rows], dtype=torch.long)
    mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows], dtype=torch.long)
    return {"input_ids": ids, "attention_mask": mask}


class HfLlavaAdapter(HfImageTextToTextAdapter):
    """The generic adapter with LLaVA's model class, its adjacent-image fix and image tokens in place."""

    model_class = "LlavaForConditionalGeneration"
    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset({"llava_llama_2", "user_assistant", CHAT_TEMPLATE}),
        "tokenization": frozenset(Tokenization),
        "decoding": frozenset(Decoding),
    }

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, **options: Unpack[AdapterOptions]
    ) -> None:
        super().__init__(spec, paths, data_root, **options)
        template = self.execution.prompt_template
        if template == CHAT_TEMPLATE and not getattr(self.processor, "chat_template", None):
            raise AdapterError(
                f"model spec {spec.name!r}, execution {self.execution.label}: prompt_template chat_template, "
                "but the checkpoint's processor has no chat template"
            )
        self.image_token = getattr(self.processor, "image_token", LLAVA_IMAGE_TOKEN)
        known_id = getattr(self.processor, "image_token_id", None)
        self.image_token_id: int = (
            self.processor.tokenizer.convert_tokens_to_ids(self.image_token) if known_id is None else known_id
        )

    @cached_property
    def image_seq(self) -> int:
        """Ids one image takes in this transformers' input ids: the processor's own expansion of one
        image token (1 where the model expands it itself, transformers 4.37)."""
        side = self.processor.image_processor.crop_size
        picture = Image.new("RGB", (side["width"], side["height"]))
        ids = self.processor(text=[self.image_token], images=[picture], return_tensors="pt")["input_ids"]
        return int((ids == self.image_token_id).sum())

    def render(self, sample: ModelInput) -> str:
        """The model's text input: image tokens in place, wrapped in the execution's turn format."""
        prompt = sample.prompt.replace(ADJACENT_IMAGES, ADJACENT_IMAGES_SPLIT)
        text = prompt.replace(IMAGE_PLACEHOLDER, self.image_token)
        template = self.execution.prompt_template
        if template != CHAT_TEMPLATE:
            return template_renderer(template)(text)
        conversation = [{"role": "user", "content": [{"type": "text", "text": text}]}]
        return self.processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)

    def token_ids(self, text: str) -> list[int]:
        """``per_chunk`` ids of a rendered text, each image token repeated to the image's id count."""
        image_ids = [self.image_token_id] * self.image_seq
        return per_chunk_ids(text, self.processor.tokenizer, self.image_token, image_ids)

    def encode(self, samples: Sequence[ModelInput]) -> BatchFeature:
        if self.execution.tokenization is Tokenization.WHOLE:
            return super().encode(samples)
        return self.assemble([(self.token_ids(self.render(s)), self.input_images(s)[0]) for s in samples])

    def assemble(self, rows: Sequence[tuple[list[int], list[Image.Image]]]) -> BatchFeature:
        """A batch from each sample's ids and pictures: ids padded on the left, the pictures of all rows
        through the image processor in row order."""
        features: dict[str, Any] = left_pad([ids for ids, _ in rows], self.processor.tokenizer.pad_token_id)
        images = [img for _, pictures in rows for img in pictures]
        if images:
            pixels = self.processor.image_processor(images, return_tensors="pt")["pixel_values"]
            features["pixel_values"] = pixels
        return BatchFeature(features)

    @property
    def image_positions(self) -> int:
        """Positions one image takes in the language model: its features (the spec's tokens per image),
        which the processor or, under transformers 4.37, the model itself expands one image token to."""
        return self.spec.n_tokens_per_image or self.image_seq

    def input_lengths(self, inputs: BatchFeature) -> list[int]:
        """Each row's length against the window: every image counts its features, also where the
        processor leaves one id per image (transformers 4.37) and the model expands it."""
        extra = self.image_positions - self.image_seq
        lengths = super().input_lengths(inputs)
        return [n + k * extra for n, k in zip(lengths, self.images_per_row(inputs), strict=True)]

    def images_per_row(self, inputs: BatchFeature) -> list[int]:
        return [int((row == self.image_token_id).sum()) // self.image_seq for row in inputs["input_ids"]]

    def official_prompt_len(self, inputs: BatchFeature) -> int:
        """The longest row with each image counted once, as the official worker's ids count it."""
        lengths = inputs["attention_mask"].sum(dim=1).tolist()
        images = self.images_per_row(inputs)
        return max(int(n) - k * (self.image_seq - 1) for n, k in zip(lengths, images, strict=True))
