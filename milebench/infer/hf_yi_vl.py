"""Yi-VL (01-ai/Yi-VL-6B) run as its original code runs a sample: github.com/01-ai/Yi, ``VL/``.

``single_inference.py`` there is the reference, in MileBench's worker pattern (the official LLaVA worker:
its adjacent-image fix, each ``<ImageHere>`` becomes the image token in place, greedy decoding with the
benchmark's token limits, one sample at a time):

- ``load_pretrained_model`` (``VL/llava/mm_utils.py``): the tokenizer with ``use_fast=False``, the model
  in bfloat16 with its embeddings resized to the tokenizer, the vision tower and its image processor from
  the checkpoint's ``mm_vision_tower`` subfolder (``milebench.infer.yi_vl_model`` says why the kit
  composes the model from transformers' Llama and CLIP classes);
- the prompt is ``conv_templates["mm_default"]`` with ``<image_placeholder>`` for each picture, and
  ``tokenizer_image_token`` makes the ids, ``-200`` per picture;
- each picture is padded to a square of the image processor's mean colour (``expand2square``) when the
  config's ``image_aspect_ratio`` is ``pad``, then preprocessed; the spec's ``image_preprocessing`` must
  agree with the checkpoint (the ``processor`` variant deliberately does not pad);
- ``generate`` stops by Yi's ``KeywordsStoppingCriteria`` on the conversation's ``###``
  (:class:`~milebench.infer.stopping.NewTextStop`); the answer is the new tokens decoded without special
  tokens, stripped, a trailing stop keyword cut, stripped again.

The model's language model sees each picture as its features (``multimodal_embeds``); ``generate`` gets
those embeddings with the prompt's ids, each ``-200`` repeated to the feature count, so the output starts
with the prompt as the original's does and the window is measured in the tokens the model attends to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Unpack, cast

import torch
from transformers import (
    AutoImageProcessor,
    AutoTokenizer,
    BatchFeature,
    CLIPVisionConfig,
    CLIPVisionModel,
    LlamaConfig,
)

from milebench.infer.adapter import AdapterError, AdapterOptions
from milebench.infer.hf_image_text_to_text import DTYPE_ARGUMENT, PIL_IMAGE_PROCESSOR
from milebench.infer.hf_llava import HfLlavaAdapter
from milebench.infer.input_view import InputView
from milebench.infer.records import ModelInput
from milebench.infer.stopping import NewTextStop, RowStop, without_stop_keyword
from milebench.infer.yi_vl_model import IMAGE_TOKEN_INDEX, YiVLForCausalLM, dropped_features
from milebench.paths import ModelFolders
from milebench.spec.execution import Decoding, ImageBackend, ImagePreprocessing, Tokenization
from milebench.spec.model import ModelSpec

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-yi-vl",
    "does": "generate",
    "entry": "HfYiVLAdapter",
    "tiny": {"family": "yi-vl", "builder": "milebench.infer.tiny_yi_vl:build_tiny_yi_vl"},
}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {
    "yi_mm_default": """Yi-VL's ``conv_templates["mm_default"]`` (github.com/01-ai/Yi,
    ``VL/llava/conversation.py``) for one user message and an open assistant turn: ``{system}\\n\\n### Human:
    {prompt}\\n### Assistant:``, with its bilingual system text; its separator ``###`` is the stop
    keyword.""",
}
"""The turn formats this module declares (milebench.spec.templates), each rendered by the function of its
name."""

YI_MM_DEFAULT_SYSTEM = (
    "This is a chat between an inquisitive human and an AI assistant. Assume the role of the AI assistant. "
    "Read all the images carefully, and respond to the human's questions with informative, helpful, "
    "detailed and polite answers. "
    "这是一个好奇的人类和一个人工智能助手之间的对话。"
    "假设你扮演这个AI助手的角色。"
    "仔细阅读所有的图像，并对人类的问题做出信息丰富、有帮助、详细的和礼貌的回答。"  # noqa: RUF001 (the original's full-width comma)
)
YI_MM_DEFAULT_STOP = "###"
"""The conversation's ``sep``, which Yi-VL's ``single_inference.py`` passes as its stop keyword."""


def yi_mm_default(prompt: str) -> str:
    return f"{YI_MM_DEFAULT_SYSTEM}\n\n### Human: {prompt}\n### Assistant:"


IMAGE_TOKEN = "<image_placeholder>"
"""``DEFAULT_IMAGE_TOKEN`` of Yi-VL's code."""


@dataclass(frozen=True)
class YiVLProcessor:
    """What builds Yi-VL's inputs: the tokenizer, the tower's image processor, the checkpoint's config and
    the tower's config (which fixes the features per picture)."""

    tokenizer: Any
    image_processor: Any
    config: LlamaConfig
    tower_config: CLIPVisionConfig
    image_token: str = IMAGE_TOKEN
    image_token_id: int = IMAGE_TOKEN_INDEX

    @property
    def features_per_image(self) -> int:
        """Features the language model gets per picture: the tower's patches, with CLS for ``cls_patch``."""
        tower: Any = self.tower_config  # CLIP's sizes are typed for every vision config
        side = int(tower.image_size) // int(tower.patch_size)
        return side * side + 1 - dropped_features(self.config)


def tower_folder(config: LlamaConfig) -> str:
    """The vision tower's subfolder of the checkpoint, as the original joins ``mm_vision_tower`` to it."""
    return str(config.mm_vision_tower).replace("./", "")


class HfYiVLAdapter(HfLlavaAdapter):
    """LLaVA's prompting and batching with Yi-VL's template, ids, stop rule and model."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset(TEMPLATES),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
    }
    processor: YiVLProcessor

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, **options: Unpack[AdapterOptions]
    ) -> None:
        super().__init__(spec, paths, data_root, **options)
        aspect = getattr(self.processor.config, "image_aspect_ratio", None)
        pads = self.execution.image_preprocessing is ImagePreprocessing.PAD_TO_SQUARE
        if pads and aspect != "pad":
            raise AdapterError(
                f"model spec {spec.name!r}, execution {self.execution.label}: image_preprocessing "
                f"pad_to_square, but the checkpoint's image_aspect_ratio is {aspect!r}: its code pads only "
                "for 'pad'"
            )
        budget, cost = spec.n_tokens_per_image, self.processor.features_per_image
        if budget is not None and budget < cost:
            raise AdapterError(
                f"model spec {spec.name!r}: n_tokens_per_image {budget} is below the {cost} features the "
                "checkpoint's vision tower gives each image"
            )

    @cached_property
    def image_seq(self) -> int:
        """One ``-200`` per picture in the ids, as ``tokenizer_image_token`` writes them."""
        return 1

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> YiVLProcessor:
        # Read as a Llama's without the type check: the original config's type is LLaVA's own.
        config = LlamaConfig.from_dict(LlamaConfig.get_config_dict(source, **kwargs)[0])
        tower = tower_folder(config)
        pil = PIL_IMAGE_PROCESSOR if self.execution.image_backend is ImageBackend.PIL else {}
        return YiVLProcessor(
            tokenizer=AutoTokenizer.from_pretrained(source, use_fast=False, **kwargs),
            image_processor=AutoImageProcessor.from_pretrained(source, subfolder=tower, **kwargs, **pil),
            config=config,
            tower_config=CLIPVisionConfig.from_pretrained(source, subfolder=tower, **kwargs),
        )

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The language model and projector, resized to the tokenizer, with the tower attached; the
        execution's dtype on a GPU, float32 on the CPU."""
        dtype = getattr(torch, self.execution.dtype.value) if self.device.type == "cuda" else torch.float32
        options: dict[str, Any] = {DTYPE_ARGUMENT: dtype, **kwargs}
        config = self.processor.config
        loaded: Any = YiVLForCausalLM.from_pretrained(
            source, config=config, output_loading_info=True, **options
        )
        model, info = cast(tuple[YiVLForCausalLM, dict[str, Any]], loaded)
        missing = sorted(key for key in info["missing_keys"] if "mm_projector" in key)
        if missing:
            raise AdapterError(
                f"model spec {self.spec.name!r}: {source} lacks the projector weights {missing}"
            )
        model.resize_token_embeddings(len(self.processor.tokenizer))
        tower = CLIPVisionModel.from_pretrained(
            source, subfolder=tower_folder(config), ignore_mismatched_sizes=True, **options
        )
        model.attach_vision_tower(tower)
        return cast("GenerativeModel", model)

    def expanded(self, ids: torch.Tensor) -> torch.Tensor:
        """Ids with each image id repeated to the picture's feature count: one id per embedding."""
        counts = torch.where(ids == IMAGE_TOKEN_INDEX, self.processor.features_per_image, 1)
        return torch.repeat_interleave(ids, counts, dim=-1)

    @property
    def image_positions(self) -> int:
        """The vision tower's features per picture, which each ``-200`` becomes."""
        return self.processor.features_per_image

    def input_view(self, sample: ModelInput) -> InputView:
        note = f"each image id ({IMAGE_TOKEN_INDEX}) becomes {self.processor.features_per_image} positions"
        view = super().input_view(sample)
        return replace(view, notes=(*view.notes, note))

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """The sample's embeddings (per-sample decoding: one unpadded row) and its expanded ids."""
        model = cast(YiVLForCausalLM, self.model)
        (ids,) = inputs["input_ids"]
        pixels = inputs.get("pixel_values")
        embeds = model.multimodal_embeds(ids, None if pixels is None else pixels.to(model.dtype))
        expanded = self.expanded(ids)[None]
        return {
            "input_ids": expanded,
            "inputs_embeds": embeds[None],
            "attention_mask": torch.ones_like(expanded),
        }

    def stopper(self, inputs: BatchFeature) -> RowStop | None:
        if not self.policy.stop_strings:
            return None
        (prompt_len,) = self.input_lengths(inputs)
        return NewTextStop(self.policy.stop_strings, self.processor.tokenizer, prompt_len)

    def clean(self, text: str) -> str:
        return without_stop_keyword(text, self.policy.stop_strings)
