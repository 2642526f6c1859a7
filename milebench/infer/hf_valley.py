"""Valley (luoruipu1/Valley2-7b) run as its original code runs a video: github.com/RupertLuo/Valley,
``ValleyLlamaForCausalLM.completion`` as ``valley/inference/run_valley_llamma_v2.py`` calls it.

That path is the reference, in MileBench's worker pattern (greedy decoding with the benchmark's token
limits, one sample at a time), with the sample's pictures as the frames of one video (the spec's
``image_sequence: video_frames``; the code base has no per-picture input, see the spec):

- ``from_pretrained`` of the checkpoint with ``AutoTokenizer`` (the fast tokenizer, its six vision tokens
  included) and ``init_vision_token``; the tower is ``CLIPVisionModel.from_pretrained(mm_vision_tower)``
  and its ``CLIPImageProcessor`` the one ``model_worker.py`` loads from the same name
  (:mod:`milebench.infer.valley_model` says how the kit composes the model);
- the user's message is ``<video>`` and the question (the prompt with its image placeholders taken out),
  after the script's system prompt and greeting (the ``valley`` template); ``build_inputs`` writes the
  video as ``<im_start>``, 256 ``<im_patch>``, ``<im_end>``, ``<vi_start>``, one ``<vi_frame>`` per frame
  and ``<vi_end>``, and tokenizes the whole text;
- the frames go through the image processor (``load_video``'s frame branch: resize, centre crop), all in
  one tensor;
- ``generate`` stops by Valley's ``KeywordsStoppingCriteria`` on ``###``
  (:class:`~milebench.infer.stopping.NewTextStop`); the answer is the new tokens decoded without special
  tokens and cleaned by ``process_response``.

The ids hold every position the language model attends to (the vision tokens are real tokens whose
embeddings the frames' features replace), so ``generate`` gets the prompt's ids with their embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Unpack, cast

import torch
from transformers import (
    AutoImageProcessor,
    AutoTokenizer,
    BatchFeature,
    CLIPVisionConfig,
    LlamaConfig,
)

from milebench.infer.adapter import AdapterError, AdapterOptions
from milebench.infer.hf_image_text_to_text import DTYPE_ARGUMENT, PIL_IMAGE_PROCESSOR
from milebench.infer.hf_llava import HfLlavaAdapter
from milebench.infer.hf_vila import tower_place
from milebench.infer.prompt_templates import without_pictures
from milebench.infer.records import ModelInput
from milebench.infer.registry import template_renderer
from milebench.infer.stopping import NewTextStop, RowStop
from milebench.infer.valley_model import (
    DUMMY_WIDTH,
    IM_END,
    IM_START,
    IMAGE_PATCH,
    PATCHES,
    TOWER_KEYS,
    VI_END,
    VI_START,
    VIDEO_FRAME,
    ValleyForCausalLM,
    ValleyTokens,
)
from milebench.paths import ModelFolders
from milebench.spec.execution import Decoding, ImageBackend, ImageSequence, Tokenization
from milebench.spec.model import ModelSpec

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-valley",
    "does": "generate",
    "entry": "HfValleyAdapter",
    "tiny": {"family": "valley", "builder": "milebench.infer.tiny_valley:build_tiny_valley"},
}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {
    "valley": """Valley's ``build_inputs`` (github.com/RupertLuo/Valley, ``valley/model/valley_model.py``) on
    the messages of ``valley/inference/run_valley_llamma_v2.py``: ``{system}\n\n###`` then `` Assistent: Hi
    there! How can I help you today? \n###`` (its user ``Hi!`` holds no ``<video>``, so build_inputs drops it)
    and `` Human: {prompt} \n###``, the prompt's video already written as its tokens; no assistant turn is
    opened. The stop keyword is ``###``.""",
}
"""The turn formats this module declares (milebench.spec.templates), each rendered by the function of its
name."""

VALLEY_SYSTEM = (
    "You are Valley, a large language and vision assistant trained by ByteDance. You are able to understand "
    "the visual content or video that the user provides, and assist the user with a variety of tasks using "
    "natural language. Follow the instructions carefully and explain your answers in detail."
)
"""The system prompt of ``valley/inference/run_valley_llamma_v2.py``."""
VALLEY_GREETING = "Hi there! How can I help you today?"
"""The assistant message that script sends before the query (its user ``Hi!`` before it is dropped)."""
VALLEY_STOP = "###"
"""The keyword ``completion`` gives Valley's ``KeywordsStoppingCriteria`` and cuts answers at."""


def valley(prompt: str) -> str:
    """``build_inputs`` of the script's messages, the user's message (with its video tokens) last."""
    greeting = f" Assistent: {VALLEY_GREETING} \n{VALLEY_STOP}"
    return f"{VALLEY_SYSTEM}\n\n{VALLEY_STOP}{greeting} Human: {prompt} \n{VALLEY_STOP}"


VIDEO_TOKEN = "<video>"
"""``DEFAULT_VIDEO_TOKEN``: the script's query is ``f"{DEFAULT_VIDEO_TOKEN} {question}"``."""
IMAGE_TOKEN = "<image>"
"""``build_inputs`` writes the video for this token too."""
RESPONSE_PREFIXES = ("###", "Assistant:", "Response:", "Valley:")
"""What ``process_response`` strips from the front of an answer, again and again."""
VISION_PARTS = ("model.mm_projector.", "model.vision_tower.")
"""The weights a checkpoint must hold besides the Llama's."""
POOLING_KEYS = ("use_patch_importance_pooling", "use_delta_transformer")
"""Config keys of the code base's training options that replace the mean pooling by a learnt one (the
kit ports the mean pooling of ``patch_pooling_method``'s default)."""


@dataclass(frozen=True)
class ValleyProcessor:
    """What builds Valley's inputs: the tokenizer, the tower's image processor, the checkpoint's config and
    the tower's config."""

    tokenizer: Any
    image_processor: Any
    config: LlamaConfig
    tower_config: CLIPVisionConfig
    image_token: str = VIDEO_FRAME


def video_tokens(frames: int) -> str:
    """What ``build_inputs`` writes for a video, with one ``<vi_frame>`` per frame."""
    return f"{IM_START}{IMAGE_PATCH * PATCHES}{IM_END}{VI_START}{VIDEO_FRAME * frames}{VI_END}"


def user_message(sample: ModelInput) -> str:
    """The script's query with the sample's question, its video (and any image token) written out."""
    question = without_pictures(sample.prompt)
    written = video_tokens(len(sample.images))
    return f"{VIDEO_TOKEN} {question}".replace(VIDEO_TOKEN, written).replace(IMAGE_TOKEN, written)


def process_response(text: str) -> str:
    """``process_response``: the known prefixes stripped until none is left, the text cut at ``###``."""
    out = text
    while True:
        before = len(out)
        out = out.strip()
        for prefix in RESPONSE_PREFIXES:
            if out.startswith(prefix):
                out = out[len(prefix) :].strip()
        if len(out) == before:
            break
    end = out.find(VALLEY_STOP)
    return out[: len(out) if end < 0 else end].strip()


def misfits(config: LlamaConfig, tower_config: CLIPVisionConfig) -> list[str]:
    """What in a checkpoint's config Valley's inference path cannot run (the kit's port neither)."""
    tower: Any = tower_config  # CLIP's sizes are typed for every vision config
    patches = (int(tower.image_size) // int(tower.patch_size)) ** 2
    width = getattr(config, "mm_hidden_size", None)
    learnt = [key for key in POOLING_KEYS if getattr(config, key, False)]
    return [
        *(
            [f"its tower gives {patches} patches, build_inputs writes {PATCHES}"]
            if patches != PATCHES
            else []
        ),
        *(
            [f"mm_hidden_size {width}, forward projects {DUMMY_WIDTH} features"]
            if width != DUMMY_WIDTH
            else []
        ),
        *([f"{learnt} set: the kit ports the mean patch pooling"] if learnt else []),
    ]


class HfValleyAdapter(HfLlavaAdapter):
    """LLaVA's batching with Valley's template, ids, frames, stop rule, answer cleaning and model."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset(TEMPLATES),
        "tokenization": frozenset({Tokenization.WHOLE}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
        "image_sequence": frozenset({ImageSequence.VIDEO_FRAMES}),
    }
    processor: ValleyProcessor

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, **options: Unpack[AdapterOptions]
    ) -> None:
        super().__init__(spec, paths, data_root, **options)
        if spec.n_tokens_per_image is not None and spec.n_tokens_per_image != 1:
            raise AdapterError(
                f"model spec {spec.name!r}: n_tokens_per_image {spec.n_tokens_per_image}, but each frame "
                "adds one <vi_frame> token"
            )
        if len(self.policy.stop_strings) > 1:
            raise AdapterError(
                f"model spec {spec.name!r}: stop_strings {list(self.policy.stop_strings)}: Valley's "
                "completion stops on one keyword"
            )

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> ValleyProcessor:
        # Read as a Llama's without the type check: the original config's type is Valley's own.
        config = LlamaConfig.from_dict(LlamaConfig.get_config_dict(source, **kwargs)[0])
        where, tower_kwargs = tower_place(source, config, kwargs)
        folder = Path(source) / str(tower_kwargs.get("subfolder", ""))
        if Path(source).is_dir() and not (folder / "config.json").is_file():
            raise AdapterError(
                f"model spec {self.spec.name!r}: no vision tower at {folder / 'config.json'} (the config's "
                "mm_vision_tower, relative to the checkpoint)"
            )
        tower_config = CLIPVisionConfig.from_pretrained(where, **tower_kwargs)
        misfit = misfits(config, tower_config)
        if misfit:
            raise AdapterError(
                f"model spec {self.spec.name!r}: {source} does not fit Valley's code: {'; '.join(misfit)}"
            )
        pil = PIL_IMAGE_PROCESSOR if self.execution.image_backend is ImageBackend.PIL else {}
        return ValleyProcessor(
            tokenizer=AutoTokenizer.from_pretrained(source, **kwargs),
            image_processor=AutoImageProcessor.from_pretrained(where, **tower_kwargs, **pil),
            config=config,
            tower_config=tower_config,
        )

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The language model, projector and tower, every weight from the checkpoint (the tower's under its
        pre-5 names); the execution's dtype on a GPU, float32 on the CPU."""
        dtype = getattr(torch, self.execution.dtype.value) if self.device.type == "cuda" else torch.float32
        config = self.processor.config
        config.tower_config = self.processor.tower_config.to_dict()
        options: dict[str, Any] = {DTYPE_ARGUMENT: dtype, **TOWER_KEYS, **kwargs}
        loaded: Any = ValleyForCausalLM.from_pretrained(
            source, config=config, output_loading_info=True, **options
        )
        model, info = cast(tuple[ValleyForCausalLM, dict[str, Any]], loaded)
        missing = sorted(key for key in info["missing_keys"] if key.startswith(VISION_PARTS))
        if missing:
            raise AdapterError(
                f"model spec {self.spec.name!r}: {source} lacks the projector or tower weights {missing[:4]}"
                f"{' ...' if len(missing) > 4 else ''}"
            )
        try:
            model.tokens = ValleyTokens.of(self.processor.tokenizer)
        except ValueError as err:
            raise AdapterError(f"model spec {self.spec.name!r}: {source}: {err}") from None
        return cast("GenerativeModel", model)

    @cached_property
    def image_seq(self) -> int:
        """One ``<vi_frame>`` id per picture."""
        return 1

    @property
    def image_positions(self) -> int:
        return 1

    def render(self, sample: ModelInput) -> str:
        """The model's text input: the script's messages as ``build_inputs`` writes them."""
        return template_renderer(self.execution.prompt_template)(user_message(sample))

    def token_ids(self, text: str) -> list[int]:
        """``build_inputs``' ids: the whole text through the tokenizer."""
        return list(self.processor.tokenizer(text).input_ids)

    def encode(self, samples: Sequence[ModelInput]) -> BatchFeature:
        return self.assemble([(self.token_ids(self.render(s)), self.input_images(s)[0]) for s in samples])

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """The sample's ids with their embeddings (per-sample decoding: one unpadded row)."""
        model = cast(ValleyForCausalLM, self.model)
        (ids,) = inputs["input_ids"]
        embeds = model.multimodal_embeds(ids, inputs["pixel_values"].to(model.dtype))
        return {
            "input_ids": ids[None],
            "inputs_embeds": embeds[None],
            "attention_mask": torch.ones_like(ids)[None],
        }

    def stopper(self, inputs: BatchFeature) -> RowStop | None:
        if not self.policy.stop_strings:
            return None
        (prompt_len,) = self.input_lengths(inputs)
        return NewTextStop(self.policy.stop_strings, self.processor.tokenizer, prompt_len)

    def clean(self, text: str) -> str:
        return process_response(text)
