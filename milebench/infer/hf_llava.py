"""LLaVA-family models through ``transformers`` (hub checkpoints and the kit's tiny checkpoints).

Prompting follows the official LLaVA worker where it matters for answers: ``<ImageHere><ImageHere>``
becomes ``<ImageHere>\\n<ImageHere>\\n`` (its CLEVR-Change fix), every placeholder becomes the
processor's image token, the answer is decoded from the new tokens only and stripped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import transformers
from PIL import Image
from transformers import AutoProcessor, BatchFeature, LlavaForConditionalGeneration

from milebench.infer.adapter import AdapterError, TokenUsage
from milebench.paths import RunPaths
from milebench.records import IMAGE_PLACEHOLDER, PreparedSample
from milebench.spec.model import HubWeights, ModelSpec, TinyWeights

ADJACENT_IMAGES = IMAGE_PLACEHOLDER * 2
ADJACENT_IMAGES_SPLIT = f"{IMAGE_PLACEHOLDER}\n{IMAGE_PLACEHOLDER}\n"


def checkpoint(spec: ModelSpec, paths: RunPaths) -> tuple[str, dict[str, Any]]:
    """Where ``from_pretrained`` reads the model and with which keyword arguments."""
    weights = spec.weights
    if isinstance(weights, TinyWeights):
        if weights.family != "llava":
            raise AdapterError(
                f"model spec {spec.name!r}: tiny family {weights.family!r} is not a LLaVA model"
            )
        folder = paths.model_dir(spec.name)
        if not (folder / "config.json").is_file():
            raise AdapterError(
                f"model spec {spec.name!r}: no checkpoint in {folder}; "
                f"run `milebench tiny-model --model {spec.name}`"
            )
        return str(folder), {}
    if isinstance(weights, HubWeights):
        return weights.repo_id, {"revision": weights.revision, "trust_remote_code": weights.trust_remote_code}
    raise AdapterError(
        f"model spec {spec.name!r}: weights kind {weights.kind!r} cannot be loaded by hf-llava"
    )


def split_segments(prompt: str) -> list[dict[str, str]]:
    """Chat-template content: text pieces and image slots in prompt order."""
    segments: list[dict[str, str]] = []
    for i, piece in enumerate(prompt.split(IMAGE_PLACEHOLDER)):
        if i:
            segments.append({"type": "image"})
        if piece:
            segments.append({"type": "text", "text": piece})
    return segments


class HfLlavaAdapter:
    """Greedy batched generation with left padding; seeded so any sampling path is reproducible too."""

    version = f"1+transformers-{transformers.__version__}+torch-{torch.__version__}"

    def __init__(self, spec: ModelSpec, paths: RunPaths, data_root: Path) -> None:
        self.spec = spec
        self.data_root = data_root
        source, kwargs = checkpoint(spec, paths)
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        try:
            self.processor = AutoProcessor.from_pretrained(source, **kwargs)
            self.model = LlavaForConditionalGeneration.from_pretrained(source, dtype=dtype, **kwargs)
        except OSError as err:
            raise AdapterError(f"model spec {spec.name!r}: cannot load {source} {kwargs}: {err}") from err
        self.processor.tokenizer.padding_side = "left"
        if self.processor.tokenizer.pad_token is None:
            self.processor.tokenizer.pad_token = self.processor.tokenizer.eos_token
        self.model.to(self.device).eval()
        self._usage: list[TokenUsage] = []

    def render(self, sample: PreparedSample) -> str:
        """The model's text input: image tokens in place, wrapped in the chat format."""
        prompt = sample.prompt.replace(ADJACENT_IMAGES, ADJACENT_IMAGES_SPLIT)
        if self.processor.chat_template:
            conversation = [{"role": "user", "content": split_segments(prompt)}]
            return self.processor.apply_chat_template(conversation, add_generation_prompt=True)
        text = prompt.replace(IMAGE_PLACEHOLDER, self.processor.image_token)
        return f"USER: {text} ASSISTANT:"

    def load_images(self, sample: PreparedSample) -> list[Image.Image]:
        images = []
        for rel in sample.images:
            with Image.open(self.data_root / rel) as img:
                images.append(img.convert("RGB"))
        return images

    def encode(self, samples: Sequence[PreparedSample]) -> BatchFeature:
        """Token ids (image tokens expanded), attention mask and pixel values of a batch."""
        texts = [self.render(s) for s in samples]
        images = [img for s in samples for img in self.load_images(s)]
        return self.processor(text=texts, images=images or None, return_tensors="pt", padding=True)

    @torch.inference_mode()
    def generate(self, samples: Sequence[PreparedSample]) -> list[str]:
        inputs = self.encode(samples).to(self.device)
        torch.manual_seed(self.spec.generation.seed)
        tokenizer = self.processor.tokenizer
        output = self.model.generate(
            **inputs,
            do_sample=self.spec.generation.do_sample,
            max_new_tokens=self.spec.generation.max_new_tokens,
            min_new_tokens=self.spec.generation.min_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
        )
        new_tokens = output[:, inputs["input_ids"].shape[1] :]
        self._usage = [
            TokenUsage(int(mask.sum()), int((row != tokenizer.pad_token_id).sum()))
            for mask, row in zip(inputs["attention_mask"], new_tokens, strict=True)
        ]
        return [text.strip() for text in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]

    def last_usage(self) -> list[TokenUsage]:
        return list(self._usage)
