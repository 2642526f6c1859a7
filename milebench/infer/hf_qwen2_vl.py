"""Qwen2-VL / Qwen2.5-VL through ``transformers``, images only.

The model's processor class cannot be built without torchvision in transformers 5 (its video half needs
it, and MileBench has no video), so this adapter composes the checkpoint's tokenizer (with its chat
template) and image processor, expands each image pad token to the image's merged patch count and
marks the image tokens, giving the same tensors as the model's processor. Images are sized so that each
one costs at most the spec's ``n_tokens_per_image`` tokens, which is what truncation counted when the
prompt was prepared.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from PIL import Image
from transformers import AutoImageProcessor, AutoTokenizer, BatchFeature, PreTrainedTokenizerBase

from milebench.infer.adapter import AdapterError
from milebench.infer.hf_image_text_to_text import HfImageTextToTextAdapter
from milebench.spec.execution import ImageBackend

ADAPTER = {
    "kind": "hf-qwen2-vl",
    "does": "generate",
    "entry": "HfQwen2VLAdapter",
    "execution": "generic",
    "tiny": {"family": "qwen2-vl", "builder": "milebench.infer.tiny_qwen2_vl:build_tiny_qwen2_vl"},
}
"""What this module runs (milebench.spec.adapters)."""

DEFAULT_IMAGE_TOKEN = "<|image_pad|>"


class Qwen2VLInputs:
    """The part of Qwen2-VL's processor that images need: chat template, pixels, image token expansion."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        image_processor: Any,
        max_tokens_per_image: int,
        min_tokens_per_image: int = 1,
    ):
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.image_token = getattr(tokenizer, "image_token", None) or DEFAULT_IMAGE_TOKEN
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.merge = int(image_processor.merge_size)
        token_pixels = (int(image_processor.patch_size) * self.merge) ** 2
        self.size = {
            "shortest_edge": min_tokens_per_image * token_pixels,
            "longest_edge": max_tokens_per_image * token_pixels,
        }

    def apply_chat_template(self, conversation: list[dict[str, Any]], **kwargs: Any) -> str:
        # transformers types every output form; the adapter's calls pass tokenize=False, which gives a str
        return self.tokenizer.apply_chat_template(conversation, **kwargs)  # type: ignore[return-value]

    def __call__(
        self, text: Sequence[str], images: Sequence[Image.Image] | None, **kwargs: Any
    ) -> BatchFeature:
        """Token ids with every image pad repeated to its image's token count, plus the pixel inputs."""
        pixels: dict[str, Any] = {}
        texts = list(text)
        if images:
            pixels = dict(self.image_processor(images=list(images), return_tensors="pt", size=self.size))
            counts = iter((pixels["image_grid_thw"].prod(-1) // self.merge**2).tolist())
            pad = re.compile(re.escape(self.image_token))
            slots = sum(len(pad.findall(t)) for t in texts)
            if slots != len(images):
                raise AdapterError(f"the prompts hold {slots} image slots for {len(images)} images")
            texts = [pad.sub(lambda _: self.image_token * next(counts), t) for t in texts]
        tensor_type = kwargs.pop("return_tensors", None)
        encoded = dict(self.tokenizer(texts, **kwargs))
        if images:
            # Image tokens 1, text 0: the model's multimodal rotary positions are computed from it.
            rows = encoded["input_ids"]
            encoded["mm_token_type_ids"] = [[int(t == self.image_token_id) for t in row] for row in rows]
        return BatchFeature({**encoded, **pixels}, tensor_type=tensor_type)


class HfQwen2VLAdapter(HfImageTextToTextAdapter):
    """The generic adapter with Qwen2-VL's inputs built from tokenizer and image processor."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        **HfImageTextToTextAdapter.supported,
        "image_backend": frozenset({ImageBackend.DEFAULT}),
    }

    def image_processor_kwargs(self) -> dict[str, Any]:
        """The spec's image-token bounds, not the checkpoint's default pixel range."""
        return {"size": dict(self.processor.size)}

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> Qwen2VLInputs:
        if self.spec.n_tokens_per_image is None:
            raise AdapterError(f"model spec {self.spec.name!r}: hf-qwen2-vl needs n_tokens_per_image")
        return Qwen2VLInputs(
            AutoTokenizer.from_pretrained(source, **kwargs),
            AutoImageProcessor.from_pretrained(source, **kwargs),
            self.spec.n_tokens_per_image,
        )
