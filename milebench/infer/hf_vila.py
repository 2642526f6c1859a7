"""VILA (Efficient-Large-Model/VILA-7b) run as its original code runs a sample:
github.com/Efficient-Large-Model/VILA, the ``llava`` package.

``llava/eval/run_llava.py`` there is the reference, as the README runs VILA-7B (``--conv-mode
vicuna_v1``), in MileBench's worker pattern (the official LLaVA worker: its adjacent-image fix, each
``<ImageHere>`` becomes ``<image>`` in place, greedy decoding with the benchmark's token limits, one
sample at a time):

- ``load_pretrained_model`` (``llava/model/builder.py``): ``LlamaConfig.from_pretrained``, the tokenizer
  with ``use_fast=False, legacy=False``, the model in float16 with its embeddings resized to the
  tokenizer, the vision tower and its ``CLIPImageProcessor`` from ``mm_vision_tower``
  (:mod:`milebench.infer.vila_model` says why the kit composes the model from transformers' classes);
- the prompt is ``conv_templates["vicuna_v1"]`` and ``tokenizer_image_token`` makes the ids, ``-200``
  per picture;
- ``process_images``: each picture padded to a square of the image processor's mean colour
  (``expand2square``) when the config's ``image_aspect_ratio`` is ``pad``, then preprocessed;
- ``generate`` stops by LLaVA's ``KeywordsStoppingCriteria`` on the conversation's ``sep2`` ``</s>``
  (:class:`~milebench.infer.stopping.KeywordStop`, judged on VILA's output, which starts with the prompt
  ids); the answer is the new tokens decoded without special tokens, stripped, a trailing stop keyword
  cut, stripped again.

The language model sees each picture as its features; ``generate`` gets those embeddings with the
prompt's ids, each ``-200`` repeated to the feature count, both cut to the config's
``tokenizer_model_max_length`` as VILA's ``prepare_inputs_labels_for_multimodal`` cuts its embeddings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

import torch
from transformers import (
    AutoImageProcessor,
    AutoTokenizer,
    BatchFeature,
    CLIPVisionConfig,
    CLIPVisionModel,
    LlamaConfig,
)

from milebench.infer.adapter import AdapterError
from milebench.infer.hf_image_text_to_text import DTYPE_ARGUMENT, PIL_IMAGE_PROCESSOR
from milebench.infer.hf_yi_vl import HfYiVLAdapter, YiVLProcessor
from milebench.infer.stopping import KeywordStop, RowStop
from milebench.infer.vila_model import VilaForCausalLM, max_positions
from milebench.spec.execution import Decoding, ImageBackend, Tokenization

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-vila",
    "does": "generate",
    "entry": "HfVilaAdapter",
    "tiny": {"family": "vila", "builder": "milebench.infer.tiny_vila:build_tiny_vila"},
}
"""What this module runs (milebench.spec.adapters)."""

IMAGE_TOKEN = "<image>"
"""``DEFAULT_IMAGE_TOKEN`` of VILA's code (``llava/constants.py``)."""
HUB_TOWER_PREFIX = "openai"
"""``build_vision_tower`` takes a tower name that starts so as a hub repository (CLIP's own)."""
ADDED_TOKEN_KEYS = ("mm_use_im_patch_token", "mm_use_im_start_end")
"""Config keys that make ``load_pretrained_model`` add tokens (``<im_patch>``, ``<im_start>``,
``<im_end>``), whose new embedding rows it draws at random; the patch token is added when the key is
missing."""


def tower_place(source: str, config: LlamaConfig, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Where ``CLIPVisionTower.load_model`` reads the tower: a hub name (``openai/...``) as it is, at that
    repository's current revision (the original pins none); otherwise a folder of the checkpoint."""
    name = str(getattr(config, "mm_vision_tower", "") or "")
    if not name:
        raise ValueError(f"{source} config.json names no mm_vision_tower")
    if name.startswith(HUB_TOWER_PREFIX):
        return name, {k: v for k, v in kwargs.items() if k not in ("revision", "trust_remote_code")}
    return source, {**kwargs, "subfolder": name.removeprefix("./")}


class HfVilaAdapter(HfYiVLAdapter):
    """Yi-VL's composition with VILA's template, tokenizer, tower, projector, stop rule and cut."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset({"vicuna_v1", "llava_llama_2"}),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
    }

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> YiVLProcessor:
        # Read as a Llama's without the type check, as load_pretrained_model reads it.
        config = LlamaConfig.from_dict(LlamaConfig.get_config_dict(source, **kwargs)[0])
        added = [key for key in ADDED_TOKEN_KEYS if getattr(config, key, key == "mm_use_im_patch_token")]
        if added:
            raise AdapterError(
                f"model spec {self.spec.name!r}: {source} config.json sets {added} (or leaves "
                "mm_use_im_patch_token out): VILA's loader then adds tokens with randomly drawn embeddings, "
                "which the kit does not port"
            )
        where, tower_kwargs = tower_place(source, config, kwargs)
        pil = PIL_IMAGE_PROCESSOR if self.execution.image_backend is ImageBackend.PIL else {}
        return YiVLProcessor(
            tokenizer=AutoTokenizer.from_pretrained(source, use_fast=False, legacy=False, **kwargs),
            # CLIP's image processor, as the tower folder's config names it; Auto picks its PIL class.
            image_processor=AutoImageProcessor.from_pretrained(where, **tower_kwargs, **pil),
            config=config,
            tower_config=CLIPVisionConfig.from_pretrained(where, **tower_kwargs),
            image_token=IMAGE_TOKEN,
        )

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The language model and projector, resized to the tokenizer, with the tower attached; the
        execution's dtype on a GPU, float32 on the CPU."""
        dtype = getattr(torch, self.execution.dtype.value) if self.device.type == "cuda" else torch.float32
        config = self.processor.config
        options: dict[str, Any] = {DTYPE_ARGUMENT: dtype, **kwargs}
        try:
            loaded: Any = VilaForCausalLM.from_pretrained(
                source, config=config, output_loading_info=True, **options
            )
        except AdapterError as err:  # the config names what VILA's code cannot build
            raise AdapterError(f"model spec {self.spec.name!r}: {source} config.json: {err}") from None
        model, info = cast(tuple[VilaForCausalLM, dict[str, Any]], loaded)
        missing = sorted(key for key in info["missing_keys"] if "mm_projector" in key)
        if missing:
            raise AdapterError(
                f"model spec {self.spec.name!r}: {source} lacks the projector weights {missing}"
            )
        model.resize_token_embeddings(len(self.processor.tokenizer))
        where, tower_kwargs = tower_place(source, config, kwargs)
        tower_options: dict[str, Any] = {DTYPE_ARGUMENT: dtype, **tower_kwargs}
        tower = CLIPVisionModel.from_pretrained(where, ignore_mismatched_sizes=True, **tower_options)
        model.attach_vision_tower(tower)
        return cast("GenerativeModel", model)

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """Yi-VL's embeddings and expanded ids, cut to ``tokenizer_model_max_length``."""
        given = super().generate_inputs(inputs)
        cut = max_positions(self.processor.config)
        return given if cut is None else {key: value[:, :cut] for key, value in given.items()}

    def stopper(self, inputs: BatchFeature) -> RowStop | None:
        """LLaVA's criterion as VILA's ``generate`` meets it: the output starts with the prompt's ids (one
        per picture), so those are what the criterion sees before the new tokens."""
        if not self.policy.stop_strings:
            return None
        (ids,) = inputs["input_ids"]
        (given,) = self.input_lengths(inputs)
        cut = max_positions(self.processor.config)
        prompt_len = given if cut is None else min(given, cut)
        official = ids.tolist()
        return KeywordStop(
            self.policy.stop_strings, self.processor.tokenizer, prompt_len, len(official), official
        )
