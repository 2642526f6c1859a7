"""LLaMA-VID (YanweiLi/llama-vid-7b-full-224-video-fps-1) run as its original code runs a video:
github.com/dvlab-research/LLaMA-VID, ``llamavid/eval/model_video_chatgpt_general.py``.

That evaluation is the reference, in MileBench's worker pattern (greedy decoding with the benchmark's token
limits, one sample at a time), with the sample's pictures as the frames of one video (the spec's
``image_sequence: video_frames``; the code base has no per-picture input, see the spec):

- ``load_pretrained_model`` (``llamavid/model/builder.py``): the tokenizer with ``use_fast=False``, the
  model in float16 with its embeddings resized to the tokenizer, the EVA ViT-g from the ``.pth`` file
  ``mm_vision_tower`` names with the image processor ``image_processor`` names, and the attention modules
  (``initialize_attention_modules``: the Q-Former and its BERT tokenizer, ``init_bert``'s
  ``bert-base-uncased`` with ``[DEC]`` added, truncating on the left); ``milebench.infer.llama_vid_model``
  says how the kit composes the model;
- the question is the prompt with its image placeholders taken out; the turn is
  ``conv_templates["vicuna_v1"]`` around ``<image>\\n`` and the question, and ``tokenizer_image_token``
  makes the ids, one ``-200`` for the whole video;
- the frames go through the image processor alone (``image_processor.preprocess(video)``: resize, centre
  crop, no padding), all in one tensor;
- ``update_prompt([[question]])``: the Q-Former reads the question (BERT ids, at most 256, cut on the
  left) with every frame;
- ``generate`` stops by LLaVA 1.1's ``KeywordsStoppingCriteria`` on the conversation's ``</s>``
  (:class:`~milebench.infer.stopping.RecentTextStop`); the answer is the new tokens decoded without special
  tokens, stripped, a trailing stop keyword cut, stripped again.

The language model sees the frames as two tokens each (``multimodal_embeds``); ``generate`` gets those
embeddings with the prompt's ids, the ``-200`` repeated to the frames' token count, so the output starts
with the prompt as the original's does and the window is measured in the tokens the model attends to.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Unpack, cast

import torch
from PIL import Image
from transformers import AutoImageProcessor, AutoTokenizer, BatchFeature, BertTokenizer, LlamaConfig

from milebench.data.weight_files import verified_weight_files
from milebench.infer.adapter import AdapterError, AdapterOptions
from milebench.infer.chunk_tokens import per_chunk_ids
from milebench.infer.hf_image_text_to_text import DTYPE_ARGUMENT, PIL_IMAGE_PROCESSOR
from milebench.infer.hf_llava import HfLlavaAdapter, left_pad
from milebench.infer.input_view import InputView
from milebench.infer.llama_vid_model import (
    BERT_PROMPT_LENGTH,
    IMAGE_TOKEN_INDEX,
    QFORMER_WIDTH,
    LlamaVidForCausalLM,
    QFormerShape,
)
from milebench.infer.minigpt_v2_model import EvaShape
from milebench.infer.prompt_templates import without_pictures
from milebench.infer.records import ModelInput
from milebench.infer.registry import template_renderer
from milebench.infer.stopping import RecentTextStop, RowStop, without_stop_keyword
from milebench.infer.tiny_llama_vid import BERT_DIR, read_eva_shape
from milebench.paths import ModelFolders
from milebench.spec.execution import Decoding, ImageBackend, ImageSequence, Tokenization
from milebench.spec.model import ModelSpec, TinyWeights, UrlWeights

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-llama-vid",
    "does": "generate",
    "entry": "HfLlamaVidAdapter",
    "tiny": {"family": "llama-vid", "builder": "milebench.infer.tiny_llama_vid:build_tiny_llama_vid"},
}
"""What this module runs (milebench.spec.adapters)."""

IMAGE_TOKEN = "<image>"
"""``DEFAULT_IMAGE_TOKEN`` of LLaMA-VID's code."""
TOKENS_PER_FRAME = 2
"""``token_generation`` under ``compress_type: mean``: one context and one content token per frame."""
URL_PARTS = ("eva_vit_g.pth", "bert-base-uncased-config.json", "bert-base-uncased-vocab.txt")
"""The url weights' files beside the hub checkpoint: the ViT ``mm_vision_tower`` names, and the BERT
config and vocabulary ``init_bert`` loads as ``bert-base-uncased``."""


@dataclass(frozen=True)
class LlamaVidParts:
    """Where the parts outside the checkpoint's weights lie: the EVA ViT's state dict and sizes, the
    image processor's folder, the BERT config and vocabulary."""

    eva: Path
    eva_shape: EvaShape
    image_processor: Path
    bert_config: Path
    bert_vocab: Path


@dataclass(frozen=True)
class LlamaVidProcessor:
    """What builds LLaMA-VID's inputs: the Llama tokenizer, the frames' image processor, the Q-Former's
    BERT tokenizer and the checkpoint's config."""

    tokenizer: Any
    image_processor: Any
    bert_tokenizer: Any
    config: LlamaConfig


def checkpoint_folder(spec: ModelSpec, paths: ModelFolders, source: str) -> Path:
    """The local folder of the checkpoint: a tiny one's, or the hub snapshot's (the original resolves
    ``mm_vision_tower`` and ``image_processor`` against it)."""
    if isinstance(spec.weights, TinyWeights):
        return paths.model_dir(spec.name)
    from huggingface_hub import snapshot_download

    revision = (
        spec.weights.base.revision if isinstance(spec.weights, UrlWeights) and spec.weights.base else None
    )
    return Path(snapshot_download(source, revision=revision))


def part_files(spec: ModelSpec, paths: ModelFolders, folder: Path, config: LlamaConfig) -> LlamaVidParts:
    """The parts beside a tiny checkpoint, at the paths its config names relative to it; or the url
    weights' files from the weights cache, each verified before use, with the real model's ViT-g sizes."""
    processor = folder / str(getattr(config, "image_processor", "")).replace("./", "", 1)
    if isinstance(spec.weights, TinyWeights):
        return LlamaVidParts(
            eva=folder / str(config.mm_vision_tower).replace("./", "", 1),
            eva_shape=read_eva_shape(folder),
            image_processor=processor,
            bert_config=folder / BERT_DIR / "config.json",
            bert_vocab=folder / BERT_DIR / "vocab.txt",
        )
    if isinstance(spec.weights, UrlWeights):
        files = verified_weight_files(spec)
        missing = sorted(set(URL_PARTS) - set(files))
        if missing:
            raise AdapterError(f"model spec {spec.name!r}: weights.files lacks {missing}")
        eva, bert_config, bert_vocab = (files[name] for name in URL_PARTS)
        return LlamaVidParts(eva, EvaShape(), processor, bert_config, bert_vocab)
    raise AdapterError(f"model spec {spec.name!r}: weights kind {spec.weights.kind!r} has no LLaMA-VID parts")


def question(sample: ModelInput) -> str:
    """The sample's prompt with its image placeholders taken out: the pictures reach the model as one
    video in front of it."""
    return without_pictures(sample.prompt)


class HfLlamaVidAdapter(HfLlavaAdapter):
    """LLaVA's batching with LLaMA-VID's template, ids, frames, Q-Former prompt, stop rule and model."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset({"vicuna_v1"}),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
        "image_sequence": frozenset({ImageSequence.VIDEO_FRAMES}),
    }
    processor: LlamaVidProcessor

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, **options: Unpack[AdapterOptions]
    ) -> None:
        self.paths = paths
        super().__init__(spec, paths, data_root, **options)
        compress = getattr(self.processor.config, "compress_type", None)
        if compress != "mean":
            raise AdapterError(
                f"model spec {spec.name!r}: the checkpoint's compress_type is {compress!r}; the kit ports "
                "the video checkpoints' 'mean' (two tokens per frame)"
            )
        if spec.n_tokens_per_image is not None and spec.n_tokens_per_image != TOKENS_PER_FRAME:
            raise AdapterError(
                f"model spec {spec.name!r}: n_tokens_per_image {spec.n_tokens_per_image}, but compress_type "
                f"mean gives {TOKENS_PER_FRAME} tokens per frame"
            )

    @cached_property
    def image_seq(self) -> int:
        """One ``-200`` for all frames, as ``tokenizer_image_token`` writes the video."""
        return 1

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> LlamaVidProcessor:
        # Read as a Llama's without the type check: the original config's type is LLaVA's own.
        config = LlamaConfig.from_dict(LlamaConfig.get_config_dict(source, **kwargs)[0])
        self.parts = part_files(
            self.spec, self.paths, checkpoint_folder(self.spec, self.paths, source), config
        )
        if not (self.parts.image_processor / "preprocessor_config.json").is_file():
            raise AdapterError(
                f"model spec {self.spec.name!r}: no image processor at {self.parts.image_processor} (the "
                "config's image_processor, relative to the checkpoint)"
            )
        pil = PIL_IMAGE_PROCESSOR if self.execution.image_backend is ImageBackend.PIL else {}
        # The vocabulary file as the first argument: its name differs between transformers 4 and 5.
        bert = BertTokenizer(str(self.parts.bert_vocab), truncation_side="left")
        bert.add_special_tokens({"bos_token": "[DEC]"})
        return LlamaVidProcessor(
            tokenizer=AutoTokenizer.from_pretrained(source, use_fast=False, **kwargs),
            image_processor=AutoImageProcessor.from_pretrained(self.parts.image_processor, **pil),
            bert_tokenizer=bert,
            config=config,
        )

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The language model, projector and attention modules, resized to the tokenizer, with the ViT
        attached; the execution's dtype on a GPU, float32 on the CPU."""
        dtype = getattr(torch, self.execution.dtype.value) if self.device.type == "cuda" else torch.float32
        config = self.processor.config
        bert = json.loads(self.parts.bert_config.read_text(encoding="utf-8"))
        config.qformer_shape = asdict(
            QFormerShape.from_bert_config(bert, len(self.processor.bert_tokenizer), QFORMER_WIDTH)
        )
        options: dict[str, Any] = {DTYPE_ARGUMENT: dtype, **kwargs}
        loaded: Any = LlamaVidForCausalLM.from_pretrained(
            source, config=config, output_loading_info=True, **options
        )
        model, info = cast(tuple[LlamaVidForCausalLM, dict[str, Any]], loaded)
        missing = sorted(key for key in info["missing_keys"] if "mm_projector" in key or "vlm_att" in key)
        if missing:
            raise AdapterError(f"model spec {self.spec.name!r}: {source} lacks the weights {missing}")
        model.resize_token_embeddings(len(self.processor.tokenizer))
        side = self.processor.image_processor.crop_size["height"]
        model.attach_vision(
            self.parts.eva_shape, side, torch.load(self.parts.eva, map_location="cpu", weights_only=True)
        )
        return cast("GenerativeModel", model)

    def render(self, sample: ModelInput) -> str:
        """The model's text input: the video's image token and the question in the execution's turn."""
        return template_renderer(self.execution.prompt_template)(f"{IMAGE_TOKEN}\n{question(sample)}")

    def token_ids(self, text: str) -> list[int]:
        return per_chunk_ids(text, self.processor.tokenizer, IMAGE_TOKEN, [IMAGE_TOKEN_INDEX])

    def qformer_ids(self, sample: ModelInput) -> list[int]:
        """The question as ``vlm_attention`` tokenizes it for the Q-Former."""
        encoded = self.processor.bert_tokenizer(
            [question(sample)], padding="longest", truncation=True, max_length=BERT_PROMPT_LENGTH
        )
        return list(encoded["input_ids"][0])

    def encode(self, samples: Sequence[ModelInput]) -> BatchFeature:
        """Ids padded on the left, every sample's frames in row order, each row's frame count, and the
        Q-Former's ids of each row padded on the right (one prompt per sample: its mask is all ones)."""
        rows = [(self.token_ids(self.render(s)), self.input_images(s)[0]) for s in samples]
        features: dict[str, Any] = left_pad([ids for ids, _ in rows], self.processor.tokenizer.pad_token_id)
        frames: list[Image.Image] = [img for _, pictures in rows for img in pictures]
        if frames:
            features["pixel_values"] = self.processor.image_processor(frames, return_tensors="pt")[
                "pixel_values"
            ]
        features["frames"] = torch.tensor([len(pictures) for _, pictures in rows])
        bert = [self.qformer_ids(s) for s in samples]
        width = max(len(ids) for ids in bert)
        features["qformer_input_ids"] = torch.tensor([ids + [0] * (width - len(ids)) for ids in bert])
        features["qformer_attention_mask"] = torch.tensor(
            [[1] * len(ids) + [0] * (width - len(ids)) for ids in bert]
        )
        return BatchFeature(features)

    def images_per_row(self, inputs: BatchFeature) -> list[int]:
        return [int(n) for n in inputs["frames"].tolist()]

    def split_rows(self, inputs: BatchFeature) -> Iterator[BatchFeature]:
        """Each sample's unpadded ids, frames and Q-Former ids."""
        for i, row in enumerate(super().split_rows(inputs)):
            keep = inputs["qformer_attention_mask"][i].bool()
            row["frames"] = inputs["frames"][i : i + 1]
            row["qformer_input_ids"] = inputs["qformer_input_ids"][i][keep][None]
            row["qformer_attention_mask"] = inputs["qformer_attention_mask"][i][keep][None]
            yield row

    def input_lengths(self, inputs: BatchFeature) -> list[int]:
        """Each row's length against the window: the image id becomes two positions per frame."""
        lengths = [int(n) for n in inputs["attention_mask"].sum(dim=1).tolist()]
        return [
            n - 1 + TOKENS_PER_FRAME * k if k else n
            for n, k in zip(lengths, self.images_per_row(inputs), strict=True)
        ]

    def official_prompt_len(self, inputs: BatchFeature) -> int:
        return int(inputs["attention_mask"].sum(dim=1).max())

    def expanded(self, ids: torch.Tensor, frames: int) -> torch.Tensor:
        """Ids with the image id repeated to the frames' token count: one id per embedding."""
        counts = torch.where(ids == IMAGE_TOKEN_INDEX, TOKENS_PER_FRAME * frames, 1)
        return torch.repeat_interleave(ids, counts, dim=-1)

    @property
    def image_positions(self) -> int:
        return TOKENS_PER_FRAME

    def input_view(self, sample: ModelInput) -> InputView:
        note = f"the image id ({IMAGE_TOKEN_INDEX}) becomes {TOKENS_PER_FRAME} positions per frame"
        view = super().input_view(sample)
        return replace(view, notes=(*view.notes, note))

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """The sample's embeddings (per-sample decoding: one unpadded row) and its expanded ids."""
        model = cast(LlamaVidForCausalLM, self.model)
        (ids,) = inputs["input_ids"]
        pixels = inputs.get("pixel_values")
        embeds = model.multimodal_embeds(
            ids,
            None if pixels is None else pixels.to(model.dtype),
            inputs["qformer_input_ids"],
            inputs["qformer_attention_mask"],
        )
        expanded = self.expanded(ids, int(inputs["frames"][0]))[None]
        return {
            "input_ids": expanded,
            "inputs_embeds": embeds[None],
            "attention_mask": torch.ones_like(expanded),
        }

    def stopper(self, inputs: BatchFeature) -> RowStop | None:
        if not self.policy.stop_strings:
            return None
        (prompt_len,) = self.input_lengths(inputs)
        return RecentTextStop(self.policy.stop_strings, self.processor.tokenizer, prompt_len)

    def clean(self, text: str) -> str:
        return without_stop_keyword(text, self.policy.stop_strings)
