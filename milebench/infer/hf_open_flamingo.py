"""OpenFlamingo (openflamingo/OpenFlamingo-9B-vitl-mpt7b) run through its original code: the
``open_flamingo`` package (github.com/mlfoundations/open_flamingo, release 2.0.1), whose README's
"Generating text" steps are the reference, in MileBench's worker pattern (the official LLaVA worker: its
adjacent-image fix, each ``<ImageHere>`` becomes the model's image token in place, one sample per
``generate``, greedy with the benchmark's token limits):

- the model, its image transform and tokenizer come from ``create_model_and_transforms`` with the
  checkpoint loaded over them (``milebench.infer.open_flamingo_model``);
- the text is OpenFlamingo's interleaving: each picture an ``<image>`` token where it stands, the
  question's chunk left open (the ``open_flamingo_chunked`` template closes each picture's chunk with
  ``<|endofchunk|>`` before the next picture); the tokenizer encodes the whole text at once;
- each picture goes through the open_clip transform (resize the shorter side, centre-crop, normalise),
  and the pictures of a sample become ``vision_x`` of shape (B, T_img, F, C, H, W) = (1, n, 1, 3, H, W);
- ``Flamingo.generate(vision_x, lang_x, attention_mask, ...)`` stops at ``<|endofchunk|>`` (its default
  ``eos_token_id``); the answer is the new ids decoded without special tokens (its evaluation code's
  ``get_outputs``), stripped as the official worker strips.

An image costs one ``<image>`` token of the text window: its 64 Perceiver latents reach the language
model through cross-attention, not as positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Unpack, cast

import torch
from PIL import Image
from transformers import BatchFeature, GenerationConfig

from milebench.infer.adapter import AdapterError, AdapterOptions
from milebench.infer.hf_llava import HfLlavaAdapter, left_pad
from milebench.infer.open_flamingo_model import (
    CHECKPOINT_FILE,
    FlamingoParts,
    load_flamingo,
    read_layout,
    release_layout,
    resolved,
)
from milebench.infer.prompt_templates import plain
from milebench.infer.records import ModelInput
from milebench.infer.stopping import RowStop
from milebench.paths import ModelFolders
from milebench.spec.execution import Decoding, ImageBackend, ImagePreprocessing, Tokenization
from milebench.spec.model import HubWeights, ModelSpec

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel

ADAPTER = {
    "kind": "open-flamingo",
    "does": "generate",
    "entry": "OpenFlamingoAdapter",
    "tiny": {
        "family": "open-flamingo",
        "builder": "milebench.infer.tiny_open_flamingo:build_tiny_open_flamingo",
    },
}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {
    "open_flamingo": """OpenFlamingo's interleaved text (github.com/mlfoundations/open_flamingo, its README's
    generation example and evaluation prompts): no turn and no system text, each picture an ``<image>`` token
    in place, the question's chunk left open (no ``<|endofchunk|>``), so the model continues it.""",
    "open_flamingo_chunked": """OpenFlamingo's interleaved text with an ``<|endofchunk|>`` before every
    ``<image>`` but the first, as its training data closes each picture's chunk of text before the next
    picture.""",
}
"""The turn formats this module declares (milebench.spec.templates), each rendered by the function of its
name."""

OPEN_FLAMINGO_IMAGE_TOKEN = "<image>"
"""The media token OpenFlamingo's ``create_model_and_transforms`` adds to the tokenizer."""
OPEN_FLAMINGO_END_OF_CHUNK = "<|endofchunk|>"
"""The token that ends a picture's chunk of text (added beside ``<image>``); its generate stops on it."""

open_flamingo = plain
"""OpenFlamingo's text has no turn: the prompt as it is."""


def open_flamingo_chunked(prompt: str) -> str:
    """Every ``<image>`` after the first preceded by ``<|endofchunk|>``."""
    first, *rest = prompt.split(OPEN_FLAMINGO_IMAGE_TOKEN)
    if not rest:
        return first
    head, *tail = rest
    joiner = OPEN_FLAMINGO_END_OF_CHUNK + OPEN_FLAMINGO_IMAGE_TOKEN
    return first + OPEN_FLAMINGO_IMAGE_TOKEN + head + "".join(joiner + piece for piece in tail)


@dataclass(frozen=True)
class FlamingoProcessor:
    """What builds OpenFlamingo's inputs: the tokenizer with its added tokens and the open_clip transform."""

    tokenizer: Any
    image_processor: Any
    image_token: str = OPEN_FLAMINGO_IMAGE_TOKEN

    @property
    def image_token_id(self) -> int:
        """``tokenizer.encode("<image>")[-1]``, as ``create_model_and_transforms`` finds the media id."""
        return int(self.tokenizer.encode(self.image_token)[-1])


class OpenFlamingoAdapter(HfLlavaAdapter):
    """LLaVA's prompting and per-sample loop with OpenFlamingo's text, pictures, model and generate."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset(TEMPLATES),
        "image_preprocessing": frozenset({ImagePreprocessing.PROCESSOR}),
        "image_backend": frozenset({ImageBackend.DEFAULT}),
        "tokenization": frozenset({Tokenization.WHOLE}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
        "stop_strings": frozenset({()}),
        "original_vocab_only": frozenset({False}),
    }
    processor: FlamingoProcessor

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, **options: Unpack[AdapterOptions]
    ) -> None:
        self._parts: FlamingoParts | None = None
        super().__init__(spec, paths, data_root, **options)

    @cached_property
    def image_seq(self) -> int:
        """One ``<image>`` id per picture: the pictures are no positions of the text."""
        return 1

    @property
    def image_positions(self) -> int:
        """Positions a picture takes in the language model's window: its one ``<image>`` token."""
        return 1

    def parts(self, source: str, kwargs: dict[str, Any]) -> FlamingoParts:
        """The original build, once: it makes model, transform and tokenizer together."""
        if self._parts is None:
            if isinstance(self.spec.weights, HubWeights):
                from huggingface_hub import hf_hub_download

                layout = release_layout(source, self.spec.name)
                checkpoint = Path(hf_hub_download(source, CHECKPOINT_FILE, revision=kwargs.get("revision")))
                self._parts = load_flamingo(layout, checkpoint, self.spec.name)
            else:
                folder = Path(source)
                layout = resolved(read_layout(folder, self.spec.name), folder)
                self._parts = load_flamingo(layout, folder / CHECKPOINT_FILE, self.spec.name)
        return self._parts

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> FlamingoProcessor:
        parts = self.parts(source, kwargs)
        return FlamingoProcessor(tokenizer=parts.tokenizer, image_processor=parts.image_processor)

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The Flamingo model in float32 (as the original builds it), in the execution's dtype on a GPU;
        its generation config names what its ``generate`` stops at (``<|endofchunk|>``)."""
        model = self.parts(source, kwargs).model
        if self.device.type == "cuda":
            model.to(getattr(torch, self.execution.dtype.value))
        eoc = int(self.processor.tokenizer.encode(OPEN_FLAMINGO_END_OF_CHUNK)[-1])
        if eoc != model.eoc_token_id:
            raise AdapterError(
                f"model spec {self.spec.name!r}: <|endofchunk|> is id {eoc}, the model's {model.eoc_token_id}"
            )
        model.generation_config = GenerationConfig(eos_token_id=eoc)
        return cast("GenerativeModel", model)

    def encode(self, samples: Sequence[ModelInput]) -> BatchFeature:
        """Ids of the whole text (the tokenizer's own special tokens: none for MPT's) and pictures."""
        tokenizer = self.processor.tokenizer
        rows = [(list(tokenizer(self.render(s))["input_ids"]), self.input_images(s)[0]) for s in samples]
        features: dict[str, Any] = left_pad([ids for ids, _ in rows], tokenizer.pad_token_id)
        images = [picture for _, pictures in rows for picture in pictures]
        if images:
            features[self.pixel_key] = self.pixels(images)
        return BatchFeature(features)

    def pixels(self, images: Sequence[Image.Image]) -> torch.Tensor:
        """Each picture through the open_clip transform, stacked: (n, C, H, W)."""
        return torch.stack([self.processor.image_processor(image) for image in images])

    @staticmethod
    def vision_x(pixels: torch.Tensor) -> torch.Tensor:
        """One sample's pictures as Flamingo takes them: (B, T_img, F, C, H, W) with B = F = 1."""
        return pixels[None, :, None]

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """``Flamingo.generate``'s arguments for one unpadded row."""
        pixels = inputs.get(self.pixel_key)
        if pixels is None:
            raise AdapterError(f"model spec {self.spec.name!r}: OpenFlamingo needs a picture per sample")
        dtype = next(self.model.parameters()).dtype
        return {
            "vision_x": self.vision_x(pixels).to(device=self.device, dtype=dtype),
            "lang_x": inputs["input_ids"],
            "attention_mask": inputs["attention_mask"],
        }

    def stopper(self, inputs: BatchFeature) -> RowStop | None:
        return None

    def new_tokens(self, inputs: BatchFeature, stop: RowStop | None) -> torch.Tensor:
        """The ids ``Flamingo.generate`` appends to the row's prompt."""
        given = self.generate_inputs(inputs)
        prompt_len = int(given["lang_x"].shape[1])
        with self.autocast():
            output = self.model.generate(**given, **self.generation_kwargs(1))
        return cast(torch.Tensor, output)[:, prompt_len:]
