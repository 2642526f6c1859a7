"""MiniGPT-v2 (Llama-2-7B-chat, github.com/Vision-CAIR/MiniGPT-4) run as its original code runs its benchmark
evaluation (``eval_scripts/eval_vqa.py`` with ``eval_configs/minigptv2_benchmark_evaluation.yaml``), in
MileBench's worker pattern (the official LLaVA worker: its adjacent-image fix, each ``<ImageHere>`` a
picture in place, one sample per ``generate``, greedy with the benchmark's token limits):

- the turn is ``CONV_VISION_minigptv2`` with its system text emptied, as ``eval_vqa.py`` does:
  ``<s>[INST] {text} [/INST]``, each picture written ``<Img><ImageHere></Img>`` (``Chat.upload_img``);
- ``get_context_emb``: the text is split at ``<ImageHere>``, each piece tokenized on its own by the slow
  ``LlamaTokenizer``, BOS only before the first (so the literal ``<s>`` of the turn makes a second BOS),
  each piece embedded, each picture's 256 features between two pieces;
- pictures go through ``blip2_image_eval`` (``Blip2ImageEvalProcessor``: a bicubic resize to 448 x 448,
  aspect ratio not kept, then CLIP's normalisation), then ``encode_img``;
- ``MiniGPTBase.generate``: the language model's ``generate`` on the embeddings alone, no stopping
  criterion (the EOS ends it), on a GPU under fp16 autocast with the LLM in float16 and the ViT's
  convolution and linear weights in float16 (``vit_precision: fp16``); the answer is the decoded ids
  without special tokens, cut at ``</s>``, ``<s>`` removed, the text after the last ``[/INST]``, stripped.

The adapter's ids hold one ``IMAGE_ID`` per picture between the pieces' ids (so the prompt can be
measured, truncated and shown); ``generate`` gets the embeddings, with those ids expanded to one per
position, so the window is measured in the positions the model attends to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Unpack, cast

import numpy as np
import torch
from PIL import Image
from transformers import AutoTokenizer, BatchFeature, LlamaForCausalLM

from milebench.data.weight_files import verified_weight_files
from milebench.infer.adapter import AdapterError, AdapterOptions
from milebench.infer.hf_image_text_to_text import DTYPE_ARGUMENT
from milebench.infer.hf_llava import ADJACENT_IMAGES, ADJACENT_IMAGES_SPLIT, HfLlavaAdapter
from milebench.infer.input_view import InputView
from milebench.infer.minigpt_v2_model import MiniGPTv2, MiniGPTv2Shape
from milebench.infer.records import IMAGE_PLACEHOLDER, ModelInput
from milebench.infer.registry import template_renderer
from milebench.infer.tiny_minigpt_v2 import CHECKPOINT_FILE, EVA_FILE, read_shape
from milebench.paths import ModelFolders
from milebench.spec.execution import Decoding, Dtype, ImagePreprocessing, Tokenization
from milebench.spec.model import ModelSpec, TinyWeights, UrlWeights

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-minigpt-v2",
    "does": "generate",
    "entry": "HfMiniGPTv2Adapter",
    "tiny": {"family": "minigpt-v2", "builder": "milebench.infer.tiny_minigpt_v2:build_tiny_minigpt_v2"},
}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {
    "minigpt_v2": """MiniGPT-v2's ``CONV_VISION_minigptv2`` (github.com/Vision-CAIR/MiniGPT-4,
    ``minigpt4/conversation/conversation.py``) with the empty system text of its benchmark evaluation:
    ``<s>[INST] {prompt} [/INST]``, each picture written ``<Img><ImageHere></Img>``.""",
}
"""The turn formats this module declares (milebench.spec.templates), each rendered by the function of its
name."""

MINIGPT_V2_IMAGE = "<Img><ImageHere></Img>"
"""How MiniGPT-v2's ``Chat.upload_img`` writes a picture into the user's message."""


def minigpt_v2(prompt: str) -> str:
    """MiniGPT-v2's ``CONV_VISION_minigptv2`` for one user message with an empty system text, as its
    ``eval_scripts/eval_vqa.py`` renders it, each ``<ImageHere>`` written as ``Chat.upload_img`` does."""
    return f"<s>[INST] {prompt.replace('<ImageHere>', MINIGPT_V2_IMAGE)} [/INST]"


IMAGE_ID = -200
"""The id the adapter puts where a picture's features go (the original splits the text there)."""
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
"""``BlipImageBaseProcessor``'s normalisation."""


@dataclass(frozen=True)
class Blip2ImageEval:
    """``Blip2ImageEvalProcessor`` computed as torchvision computes it on a PIL picture: PIL's bicubic
    resize to a square, ``ToTensor`` (bytes / 255 in float32, channels first), ``Normalize`` (minus the
    mean, over the std, in float32)."""

    image_size: int
    image_mean: tuple[float, ...] = CLIP_MEAN
    image_std: tuple[float, ...] = CLIP_STD

    def pixels(self, picture: Image.Image) -> torch.Tensor:
        side = self.image_size
        resized = picture.convert("RGB").resize((side, side), Image.Resampling.BICUBIC)
        tensor = torch.from_numpy(np.array(resized, dtype=np.uint8)).permute(2, 0, 1).contiguous()
        scaled = tensor.to(torch.float32).div(255)
        mean = torch.as_tensor(self.image_mean, dtype=torch.float32).view(-1, 1, 1)
        std = torch.as_tensor(self.image_std, dtype=torch.float32).view(-1, 1, 1)
        return scaled.sub_(mean).div_(std)

    def __call__(self, images: Sequence[Image.Image], return_tensors: str = "pt") -> dict[str, torch.Tensor]:
        return {"pixel_values": torch.stack([self.pixels(p) for p in images])}


@dataclass(frozen=True)
class MiniGPTv2Processor:
    """What builds MiniGPT-v2's inputs: the Llama tokenizer, the picture transform and the sizes."""

    tokenizer: Any
    image_processor: Blip2ImageEval
    shape: MiniGPTv2Shape
    image_token: str = IMAGE_PLACEHOLDER
    image_token_id: int = IMAGE_ID


class EvaLlamaAdapter(HfLlavaAdapter):
    """What the MiniGPT-4 descendants (MiniGPT-v2, Cheetor) share: parts beside a Llama, per-piece ids with
    one ``IMAGE_ID`` between pieces (the text split at ``image_marker``), the pictures' features in place
    of those ids, a budget the checkpoint must give."""

    part_names: ClassVar[tuple[str, ...]] = ()
    """The files the model reads beside the language model."""
    image_marker: ClassVar[str] = IMAGE_PLACEHOLDER
    """Where the rendered text is split, each split a picture."""

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, **options: Unpack[AdapterOptions]
    ) -> None:
        self.parts = self.part_files(spec, paths)
        super().__init__(spec, paths, data_root, **options)
        budget, cost = spec.n_tokens_per_image, self.features_per_image
        if budget is not None and budget != cost:
            raise AdapterError(
                f"model spec {spec.name!r}: n_tokens_per_image {budget}, but the checkpoint gives "
                f"{cost} features per image ({self.feature_source})"
            )
        if options.get("with_model", True):
            self.place_model()

    @property
    def features_per_image(self) -> int:
        raise NotImplementedError

    @property
    def feature_source(self) -> str:
        raise NotImplementedError

    def place_model(self) -> None:
        """The loaded parts on the kit's device, in eval mode."""
        raise NotImplementedError

    @classmethod
    def part_files(cls, spec: ModelSpec, paths: ModelFolders) -> dict[str, Path]:
        """The model's parts: beside a tiny checkpoint's language model, or the url weights' files from
        the weights cache, each verified before use."""
        if isinstance(spec.weights, TinyWeights):
            folder = paths.model_dir(spec.name)
            return {name: folder / name for name in cls.part_names}
        if isinstance(spec.weights, UrlWeights):
            files = verified_weight_files(spec)
            missing = sorted(set(cls.part_names) - set(files))
            if missing:
                raise AdapterError(f"model spec {spec.name!r}: weights.files lacks {missing}")
            return files
        raise AdapterError(
            f"model spec {spec.name!r}: weights kind {spec.weights.kind!r} has no {list(cls.part_names)}"
        )

    @cached_property
    def image_seq(self) -> int:
        """One ``IMAGE_ID`` per picture in the ids."""
        return 1

    def render(self, sample: ModelInput) -> str:
        prompt = sample.prompt.replace(ADJACENT_IMAGES, ADJACENT_IMAGES_SPLIT)
        return template_renderer(self.execution.prompt_template)(prompt)

    def token_ids(self, text: str) -> list[int]:
        """BOS, then each piece's ids (no special tokens added) with ``IMAGE_ID`` between pieces."""
        tokenizer = self.processor.tokenizer
        ids = [tokenizer.bos_token_id]
        for i, piece in enumerate(text.split(self.image_marker)):
            ids += [IMAGE_ID] if i else []
            ids += list(tokenizer(piece, add_special_tokens=False).input_ids)
        return ids

    def expanded(self, ids: torch.Tensor) -> torch.Tensor:
        counts = torch.where(ids == IMAGE_ID, self.features_per_image, 1)
        return torch.repeat_interleave(ids, counts, dim=-1)

    @property
    def image_positions(self) -> int:
        return self.features_per_image

    def input_view(self, sample: ModelInput) -> InputView:
        note = f"each image id ({IMAGE_ID}) becomes {self.features_per_image} positions"
        view = super().input_view(sample)
        return replace(view, notes=(*view.notes, note))

    def chunks(self, ids: torch.Tensor) -> list[torch.Tensor]:
        """The pieces' ids between the image ids, as ``get_context_emb`` tokenized them."""
        places = (ids == IMAGE_ID).nonzero().flatten().tolist()
        bounds = [-1, *places, ids.shape[0]]
        return [ids[start + 1 : end] for start, end in pairwise(bounds)]


class HfMiniGPTv2Adapter(EvaLlamaAdapter):
    """LLaVA's prompting and batching with MiniGPT-v2's turn, per-piece ids, embeddings and decoding."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset(TEMPLATES),
        "image_preprocessing": frozenset({ImagePreprocessing.PROCESSOR}),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
    }
    part_names = (EVA_FILE, CHECKPOINT_FILE)
    processor: MiniGPTv2Processor
    minigpt: MiniGPTv2

    @property
    def features_per_image(self) -> int:
        return self.processor.shape.features_per_image

    @property
    def feature_source(self) -> str:
        return f"{self.processor.shape.image_size} px, 4 patches a token"

    def place_model(self) -> None:
        self.minigpt.to(self.device).eval()
        # peft 0.2.0 merges the LoRA pairs when the loaded model is put in eval mode, on its device.
        self.minigpt.merge_lora(self.lora)

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> MiniGPTv2Processor:
        shape = read_shape(Path(source)) if Path(source).is_dir() else MiniGPTv2Shape()
        return MiniGPTv2Processor(
            tokenizer=AutoTokenizer.from_pretrained(source, **kwargs),
            image_processor=Blip2ImageEval(shape.image_size),
            shape=shape,
        )

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The language model in the execution's dtype on a GPU (float32 on the CPU), the ViT's weights
        as ``vit_precision: fp16`` leaves them, the checkpoint loaded over both; the LoRA pairs are kept
        for the merge on the device."""
        on_gpu = self.device.type == "cuda"
        dtype = getattr(torch, self.execution.dtype.value) if on_gpu else torch.float32
        options: dict[str, Any] = {DTYPE_ARGUMENT: dtype, **kwargs}
        llama = LlamaForCausalLM.from_pretrained(source, **options)
        minigpt = MiniGPTv2(self.processor.shape, llama)
        minigpt.load_vision(torch.load(self.parts[EVA_FILE], map_location="cpu", weights_only=True))
        saved = torch.load(self.parts[CHECKPOINT_FILE], map_location="cpu", weights_only=True)
        state = saved.get("model", saved)
        self.lora = {k: v for k, v in state.items() if ".lora_A." in k or ".lora_B." in k}
        used = minigpt.load_checkpoint({k: v for k, v in state.items() if k not in self.lora})
        if "llama_proj.weight" not in used:
            raise AdapterError(
                f"model spec {self.spec.name!r}: {self.parts[CHECKPOINT_FILE]} holds no llama_proj weights"
            )
        if on_gpu and self.execution.dtype is Dtype.FLOAT16:
            for module in minigpt.visual_encoder.modules():
                if isinstance(module, torch.nn.Conv2d | torch.nn.Linear):
                    module.half()
        self.minigpt = minigpt
        return cast("GenerativeModel", llama)

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        (ids,) = inputs["input_ids"]
        with self.autocast():
            embeds = self.minigpt.context_embeds(self.chunks(ids), inputs.get("pixel_values"))
        expanded = self.expanded(ids)[None]
        return {
            "input_ids": expanded,
            "inputs_embeds": embeds[None],
            "attention_mask": torch.ones_like(expanded),
        }

    def clean(self, text: str) -> str:
        """``MiniGPTBase.generate``'s decoding of the answer."""
        return text.split("</s>")[0].replace("<s>", "").split("[/INST]")[-1].strip()
