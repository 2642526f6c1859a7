"""ALLaVA-3B-Longer through the checkpoint's own remote code (``trust_remote_code``): ``llava_phi``, the
LLaVA architecture over Phi-2, run the way its original code base runs it.

MileBench ships no ALLaVA worker. ALLaVA's own inference path is ``Chatbot.chat`` of
github.com/FreedomIntelligence/ALLaVA (``allava/serve/cli.py``), whose helpers the checkpoint's
``generation_utils.py`` repeats for the checkpoint's ``chat``. One turn of it per sample:

- the user text loses every ``<image>``, ``<s>`` and ``</s>`` (``input_moderation``); MileBench's
  ``<ImageHere>`` placeholders reach it as the image token, as the official LLaVA worker hands them on,
  so they go too;
- one ``<image>\\n`` per picture goes in front of the text (``insert_image_placeholder``): every picture
  precedes the whole prompt;
- the turn is ``[INST] {text.strip()} [/INST] `` (``preprocess_allava``), tokenized chunk by chunk
  between image tokens without special tokens, each image token becoming ``IMAGE_TOKEN_INDEX``
  (``tokenizer_image_token``);
- each picture is padded to a square of the image processor's mean colour, then goes through the vision
  tower's CLIP processor (``get_image_tensors``);
- ``generate(inputs=ids, images=pixels, use_cache=True, do_sample=False, eos_token_id=eos,
  pad_token_id=eos)`` on the float16 model under bfloat16 autocast; the new tokens are decoded without
  special tokens and stripped. The checkpoint's config names no end token, so the end-of-text id is set
  as the model card passes it to every call.

The model caches the image features of its first forward pass (``cached_image_features``, llava_arch)
and reuses them until cleared, as ``clear_history`` does between items; the adapter clears them before
every sample. The model's own code keeps only the first ``tokenizer_model_max_length`` embedded
positions; the kit measures the whole input and records by how much it exceeded the window.

The ``allava_interleaved`` template keeps each picture at its placeholder instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, cast

import torch
from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer, BatchFeature, CLIPVisionConfig

from milebench.infer.adapter import AdapterError
from milebench.infer.chunk_tokens import per_chunk_ids
from milebench.infer.hf_image_text_to_text import PIL_IMAGE_PROCESSOR, HfImageTextToTextAdapter
from milebench.infer.hf_llava import ADJACENT_IMAGES, ADJACENT_IMAGES_SPLIT, left_pad
from milebench.infer.input_view import InputView
from milebench.infer.records import IMAGE_PLACEHOLDER, ModelInput
from milebench.spec.execution import Decoding, ImageBackend, Tokenization

ADAPTER = {"kind": "hf-allava", "does": "generate", "entry": "HfAllavaAdapter"}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {
    "allava": """ALLaVA's ``chat`` (its code base's ``Chatbot.chat``): ``<image>``, ``<s>`` and ``</s>`` leave
    the text, one ``<image>\\n`` per picture goes in front of it, and the turn is ``[INST] {text} [/INST]
    ``.""",
    "allava_interleaved": """ALLaVA's turn with each picture at its placeholder, where the official LLaVA
    worker puts it.""",
}
"""The turn formats this module declares (milebench.spec.templates); :meth:`HfAllavaAdapter.render` renders
them."""

IMAGE_TOKEN = "<image>"
IMAGE_TOKEN_INDEX = -200
"""The id ``tokenizer_image_token`` puts in place of each image token (allava/constants.py)."""
MODERATED = (IMAGE_TOKEN, "<s>", "</s>")
"""``input_moderation``'s blacklist: removed from the user's text."""
SELECT_EXTRA = {"patch": 0, "cls_patch": 1}
"""Features per image beyond the patches, by ``mm_vision_select_feature`` (``patch`` drops CLS)."""


def moderated(text: str) -> str:
    for word in MODERATED:
        text = text.replace(word, "")
    return text


def allava_turn(text: str) -> str:
    """``preprocess_allava``'s human turn, with the open assistant turn that follows it (none)."""
    return f"[INST] {text.strip()} [/INST] "


def chat_text(prompt: str, n_images: int) -> str:
    """The turn ``chat`` builds: placeholders moderated away, every picture in front of the text."""
    text = moderated(prompt.replace(IMAGE_PLACEHOLDER, IMAGE_TOKEN))
    return allava_turn(f"{IMAGE_TOKEN}\n" * n_images + text)


def interleaved_text(prompt: str) -> str:
    """The same turn with each picture at its placeholder (and the LLaVA worker's adjacent-image fix)."""
    text = moderated(prompt.replace(ADJACENT_IMAGES, ADJACENT_IMAGES_SPLIT))
    return allava_turn(text.replace(IMAGE_PLACEHOLDER, IMAGE_TOKEN))


class RemoteLlavaPhi(Protocol):
    """What the checkpoint's remote code (llava_arch) adds to its model; no transformers class has it."""

    cached_image_features: Any

    def get_vision_tower(self) -> Any: ...


@dataclass(frozen=True)
class AllavaProcessor:
    """What builds ALLaVA's inputs: the checkpoint's tokenizer and the CLIP processor its vision tower
    loads from ``mm_vision_tower``, with what the checkpoint's config says of the image features."""

    tokenizer: Any
    image_processor: Any
    image_features: int
    """Input positions one picture becomes: the tower's patches (and CLS under ``cls_patch``)."""
    input_limit: int | None
    """``tokenizer_model_max_length``: the positions the model's own code keeps."""


class HfAllavaAdapter(HfImageTextToTextAdapter):
    """One ``generate`` per sample through the checkpoint's code, inputs built as ALLaVA's ``chat``
    builds them (module docstring)."""

    model_class = "AutoModelForCausalLM"
    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset(TEMPLATES),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
        "stop_strings": frozenset({()}),
        "original_vocab_only": frozenset({False}),
    }
    pixel_key = "images"

    @property
    def image_seq(self) -> int:
        return self.processor.image_features

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> AllavaProcessor:
        """The tokenizer of the checkpoint and the image processor of the vision tower it names, loaded
        as PIL code when the execution asks (the paper-era stack had only that one)."""
        if not kwargs.get("trust_remote_code"):
            raise AdapterError(
                f"model spec {self.spec.name!r}: hf-allava runs the checkpoint's own code; "
                "set weights.trust_remote_code: true"
            )
        config = AutoConfig.from_pretrained(source, **kwargs)
        tower = config.mm_vision_tower
        select = config.mm_vision_select_feature
        if select not in SELECT_EXTRA:
            raise AdapterError(f"model spec {self.spec.name!r}: {source} selects {select!r} image features")
        vision = CLIPVisionConfig.from_pretrained(tower)
        backend = PIL_IMAGE_PROCESSOR if self.execution.image_backend is ImageBackend.PIL else {}
        return AllavaProcessor(
            tokenizer=AutoTokenizer.from_pretrained(source, **kwargs),
            image_processor=AutoImageProcessor.from_pretrained(tower, **backend),
            image_features=(cast(int, vision.image_size) // cast(int, vision.patch_size)) ** 2
            + SELECT_EXTRA[select],
            input_limit=getattr(config, "tokenizer_model_max_length", None),
        )

    def load_model(self, source: str, kwargs: dict[str, Any]) -> Any:
        """The checkpoint's model with its vision tower loaded and the tokenizer's end-of-text as the
        end and padding id of every ``generate``, as the model card and ``Chatbot`` pass them."""
        model = super().load_model(source, kwargs)
        tower = cast(RemoteLlavaPhi, model).get_vision_tower()
        if not tower.is_loaded:
            tower.load_model()
        eos = self.processor.tokenizer.eos_token_id
        model.generation_config.eos_token_id = eos
        model.generation_config.pad_token_id = eos
        return model

    def render(self, sample: ModelInput) -> str:
        if self.execution.prompt_template == "allava":
            return chat_text(sample.prompt, len(sample.images))
        return interleaved_text(sample.prompt)

    def encode(self, samples: Sequence[ModelInput]) -> BatchFeature:
        """Ids with one ``IMAGE_TOKEN_INDEX`` per picture (left padded), and the pictures of the batch in
        order as ``images``."""
        tokenizer = self.processor.tokenizer
        rows = [
            per_chunk_ids(self.render(s), tokenizer, IMAGE_TOKEN, [IMAGE_TOKEN_INDEX], special_tokens=False)
            for s in samples
        ]
        features: dict[str, Any] = left_pad(rows, tokenizer.pad_token_id)
        images = [img for s in samples for img in self.input_images(s)[0]]
        if images:
            features[self.pixel_key] = self.processor.image_processor(images, return_tensors="pt")[
                "pixel_values"
            ]
        return BatchFeature(features)

    def images_per_row(self, inputs: BatchFeature) -> list[int]:
        return [int((row == IMAGE_TOKEN_INDEX).sum()) for row in inputs["input_ids"]]

    def input_lengths(self, inputs: BatchFeature) -> list[int]:
        """Tokens plus every picture's features: what the model's code embeds before its own cut."""
        extra = self.image_seq - 1
        lengths = super().input_lengths(inputs)
        return [n + k * extra for n, k in zip(lengths, self.images_per_row(inputs), strict=True)]

    def input_view(self, sample: ModelInput) -> InputView:
        view = super().input_view(sample)
        notes = [f"each image id ({IMAGE_TOKEN_INDEX}) becomes {self.image_seq} positions"]
        limit = self.processor.input_limit
        if limit is not None and view.tokens > limit:
            notes.append(
                f"the checkpoint's code keeps the first {limit} positions (tokenizer_model_max_length)"
            )
        return replace(view, ids_per_image=1, notes=tuple(notes))

    def generation_kwargs(self, rows: int) -> dict[str, Any]:
        return {**super().generation_kwargs(rows), "use_cache": True}

    def new_tokens(self, inputs: BatchFeature, stop: Any) -> torch.Tensor:
        """The sample's new tokens, its pictures encoded afresh: the model keeps the features of the
        previous sample until they are cleared."""
        cast(RemoteLlavaPhi, self.model).cached_image_features = None
        return super().new_tokens(inputs, stop)
