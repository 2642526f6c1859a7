"""LWM (LargeWorldModel/LWM-Chat, 7B) run as its original code runs it: github.com/LargeWorldModel/LWM at
59d4dbe, ``lwm/vision_chat.py``'s ``Sampler`` (a JAX code base; :mod:`milebench.infer.lwm_model` is the
kit's torch port of its inference path, held to the original by the parity test).

In MileBench's worker pattern (greedy decoding with the benchmark's token limits, one sample at a time):

- each picture is ``_process_frame``'d (short side to 256, centre crop, scaled to [-1, 1]) and encoded by
  the VQGAN into 256 codes, as ``_read_process_vision`` reads an image file: one frame, closed by
  ``<eov>`` (``image_sequence: images``); under ``video_frames`` the pictures are the frames of one
  vision, as that function reads a video: of more than ``max_n_frames`` (8) it keeps 8 picked by
  ``np.linspace``, and each frame, encoded on its own, is closed by ``<eov>`` too;
- ``construct_input``'s pieces, each tokenized on its own without BOS (``add_bos_token=False``; the first
  piece writes ``<s>`` as text): ``<s>You are a helpful assistant. USER: {question}\\n`` with the prompt's
  image placeholders taken out, then per vision ``<vision>``, its codes (the vision mask set, so they
  index the vision table ``vte``) and ``</vision>``, then `` ASSISTANT:``;
- the answer is the new ids decoded without special tokens, as ``Sampler.__call__`` decodes them (the
  LLaMATokenizer of ``lwm/llama.py`` under transformers 4.29: its spacing cleanup included).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Unpack, cast

import numpy as np
import torch
from PIL import Image
from transformers import BatchFeature

from milebench.infer.adapter import AdapterError, AdapterOptions
from milebench.infer.hf_image_text_to_text import HfImageTextToTextAdapter
from milebench.infer.hf_llava import left_pad
from milebench.infer.image_preprocessing import ImageStep
from milebench.infer.lwm_model import (
    LwmFileError,
    LwmForCausalLM,
    VqganEncoder,
    VqganShape,
    llama_config,
    process_frame,
    read_streaming_params,
    read_vqgan,
    state_dict,
    vision_tokens,
)
from milebench.infer.records import IMAGE_PLACEHOLDER, ModelInput
from milebench.infer.registry import template_renderer
from milebench.paths import ModelFolders
from milebench.spec.execution import Decoding, ImageSequence, Tokenization
from milebench.spec.model import ModelSpec, TinyWeights, UrlWeights

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-lwm",
    "does": "generate",
    "entry": "HfLwmAdapter",
    "tiny": {"family": "lwm", "builder": "milebench.infer.tiny_lwm:build_tiny_lwm"},
}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {
    "lwm": """LWM's ``Sampler.construct_input`` (github.com/LargeWorldModel/LWM, ``lwm/vision_chat.py``): the
    ids of ``<s>You are a helpful assistant. USER: {prompt}\n`` (the prompt without its image placeholders),
    then each vision as ``<vision>``, its VQGAN codes (each frame closed by ``<eov>``) and ``</vision>``, then
    `` ASSISTANT:``, each piece tokenized on its own.""",
}
"""The turn formats this module declares (milebench.spec.templates), each rendered by the function of its
name."""

LWM_SYSTEM = "<s>You are a helpful assistant. USER: "
"""The start of ``construct_input``'s first text piece, BOS written as text."""
LWM_VISION_START = "<vision>"
LWM_VISION_END = "</vision>"
LWM_ASSISTANT = " ASSISTANT:"
"""``construct_input``'s last piece, after the visions."""


def lwm(prompt: str) -> str:
    """``construct_input``'s text with ``prompt`` (its visions already written in it)."""
    return f"{LWM_SYSTEM}{prompt}{LWM_ASSISTANT}"


PARAMS = "params"
VQGAN = "vqgan"
VQGAN_CONFIG = "vqgan_config.json"
CONFIG = "config.json"
TOKENIZER = "tokenizer.model"
LWM_7B: dict[str, Any] = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "vision_vocab_size": 8448,
    "max_sequence_length": 1048576,
    "theta": 50000000,
}
"""The release's config, which its files do not hold: ``LLAMA_STANDARD_CONFIGS['7b']`` (``lwm/llama.py``)
with the README's settings of the 1M models (``max_sequence_length`` 1048576, ``theta`` 50000000) and
``VideoLLaMAConfig``'s ``vision_vocab_size``."""
MAX_N_FRAMES = 8
"""``--max_n_frames`` of ``scripts/run_vision_chat.sh`` (and the flag's default in ``lwm/vision_chat.py``):
``_read_process_vision`` keeps that many frames of a longer video, picked by ``np.linspace``."""
SPECIAL = ("<s>", "</s>", "<unk>")
"""The tokenizer's special tokens, which its text is split at (transformers 4.29's slow tokenizer)."""
CLEANUPS = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)
"""transformers 4.29's ``clean_up_tokenization``, on by default in its decoding."""


class LwmTokenizer:
    """``LLaMATokenizer`` of ``lwm/llama.py`` as transformers 4.29 runs it: the text split at the special
    tokens (the whitespace beside them dropped), each other piece through SentencePiece; decoding skips
    the special ids, strips and cleans up spacing."""

    padding_side = "left"

    def __init__(self, model_file: Path) -> None:
        try:
            import sentencepiece as spm
        except ImportError as err:
            raise AdapterError("LWM's tokenizer needs sentencepiece: pip install -e '.[lwm]'") from err
        self.sp = spm.SentencePieceProcessor(model_file=str(model_file))
        self.bos_token_id = int(self.sp.bos_id())
        self.eos_token_id = int(self.sp.eos_id())
        self.pad_token_id = int(self.sp.unk_id())
        self.eos_token, self.pad_token = "</s>", "<unk>"
        self.vocab_size = int(self.sp.get_piece_size())

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str) -> list[int]:
        pieces = [text]
        for token in SPECIAL:
            pieces = [part for piece in pieces for part in _split_keep(piece, token)]
        out: list[int] = []
        for n, piece in enumerate(pieces):
            if piece in SPECIAL:
                out.append(int(self.sp.piece_to_id(piece)))
                continue
            if n > 0 and pieces[n - 1] in SPECIAL:
                piece = piece.lstrip()
            if n + 1 < len(pieces) and pieces[n + 1] in SPECIAL:
                piece = piece.rstrip()
            if piece:
                out += [int(i) for i in self.sp.encode(piece)]
        return out

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        special = {self.bos_token_id, self.eos_token_id, self.pad_token_id}
        kept = [int(i) for i in ids if not (skip_special_tokens and int(i) in special)]
        text = str(self.sp.decode(kept)).strip() if kept else ""
        for before, after in CLEANUPS:
            text = text.replace(before, after)
        return text

    def batch_decode(self, rows: Any, skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(list(row), skip_special_tokens) for row in rows]


def _split_keep(text: str, token: str) -> Iterator[str]:
    if text in SPECIAL:
        yield text
        return
    parts = text.split(token)
    for n, part in enumerate(parts):
        if n:
            yield token
        if part:
            yield part


@dataclass(frozen=True)
class LwmProcessor:
    """What builds LWM's inputs: its tokenizer, the VQGAN's encoder and the LLaMA config."""

    tokenizer: LwmTokenizer
    vqgan: VqganEncoder
    config: dict[str, Any]
    folder: Path


def question(sample: ModelInput) -> str:
    """``construct_input``'s question: the prompt without its image placeholders."""
    return sample.prompt.replace(IMAGE_PLACEHOLDER, "")


class HfLwmAdapter(HfImageTextToTextAdapter):
    """LWM's ``Sampler``: VQGAN codes in the ids, the vision table where the mask is set, greedy text."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset(TEMPLATES),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
        "image_sequence": frozenset(ImageSequence),
    }
    processor: LwmProcessor

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, **options: Unpack[AdapterOptions]
    ) -> None:
        self.run_paths = paths
        super().__init__(spec, paths, data_root, **options)
        per_image = self.image_seq
        if spec.n_tokens_per_image is not None and spec.n_tokens_per_image != per_image:
            raise AdapterError(
                f"model spec {spec.name!r}: n_tokens_per_image {spec.n_tokens_per_image}, but each picture "
                f"is {per_image} tokens (its VQGAN codes and <eov>)"
            )

    def folder(self, source: str) -> Path:
        """The checkpoint's local folder: a tiny one's, or the hub snapshot's."""
        if isinstance(self.spec.weights, TinyWeights):
            return self.run_paths.model_dir(self.spec.name)
        from huggingface_hub import snapshot_download

        weights = self.spec.weights
        revision = weights.base.revision if isinstance(weights, UrlWeights) and weights.base else None
        return Path(snapshot_download(source, revision=revision))

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> LwmProcessor:
        folder = self.folder(source)
        missing = [name for name in (PARAMS, VQGAN, TOKENIZER) if not (folder / name).is_file()]
        if missing:
            raise AdapterError(
                f"model spec {self.spec.name!r}: {folder} lacks {missing} (LWM's params, vqgan and "
                "tokenizer.model, as lwm/vision_chat.py reads them)"
            )
        config = json.loads((folder / CONFIG).read_text("utf-8")) if (folder / CONFIG).is_file() else LWM_7B
        sizes = (
            json.loads((folder / VQGAN_CONFIG).read_text("utf-8"))
            if (folder / VQGAN_CONFIG).is_file()
            else {}
        )
        if config.get("sample_mode", "text") != "text":
            raise AdapterError(
                f"model spec {self.spec.name!r}: {folder / CONFIG}: sample_mode {config['sample_mode']!r}; "
                "the chat path generates text (sample_mode 'text', run_vision_chat.sh)"
            )
        try:
            vqgan = VqganEncoder(VqganShape.of(sizes), read_vqgan(folder / VQGAN))
        except LwmFileError as err:
            raise AdapterError(f"model spec {self.spec.name!r}: {folder / VQGAN}: {err}") from None
        return LwmProcessor(LwmTokenizer(folder / TOKENIZER), vqgan, config, folder)

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The LLaMA with both input tables, every weight from ``params``; the execution's dtype on a GPU,
        float32 on the CPU."""
        tokenizer, lwm = self.processor.tokenizer, self.processor.config
        path = self.processor.folder / PARAMS
        try:
            config = llama_config(lwm, tokenizer.bos_token_id, tokenizer.eos_token_id)
            weights = state_dict(read_streaming_params(path), config)
            model = LwmForCausalLM(config, int(lwm["vision_vocab_size"]))
        except KeyError as err:
            raise AdapterError(f"model spec {self.spec.name!r}: {path} or its config lacks {err}") from None
        except LwmFileError as err:
            raise AdapterError(f"model spec {self.spec.name!r}: {path}: {err}") from None
        problems = model.load_state_dict(weights, strict=False)
        missing = [key for key in problems.missing_keys if "rotary" not in key]
        if missing or problems.unexpected_keys:
            raise AdapterError(f"model spec {self.spec.name!r}: {path}: weights missing {missing[:4]}")
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.bos_token_id = tokenizer.bos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        if self.device.type == "cuda":
            model = model.to(getattr(torch, self.execution.dtype.value))
        self.processor.vqgan.to(self.device)
        return cast("GenerativeModel", model)

    @property
    def image_seq(self) -> int:
        """Ids one picture takes: its codes and the token after them."""
        side = self.processor.vqgan.shape.resolution // 16
        return int(side * side + 1)

    def kept(self, sample: ModelInput) -> list[int]:
        """The pictures the model sees: all, or under ``video_frames`` the frames ``_read_process_vision``
        keeps of a video of them (``max_n_frames`` by ``np.linspace`` when there are more)."""
        n = len(sample.images)
        if self.execution.image_sequence is ImageSequence.VIDEO_FRAMES and n > MAX_N_FRAMES:
            return [int(k) for k in np.linspace(0, n - 1, MAX_N_FRAMES, dtype=int).tolist()]
        return list(range(n))

    def input_images(self, sample: ModelInput) -> tuple[list[Image.Image], list[ImageStep]]:
        """The pictures as ``_process_frame`` receives them (RGB), those kept only; its steps are the kit's
        own."""
        pictures = self.load_images(sample)
        return [pictures[k] for k in self.kept(sample)], []

    def frames(self, sample: ModelInput) -> torch.Tensor:
        """The frames fed to the VQGAN, ``(pictures, 256, 256, 3)`` in [-1, 1]."""
        return torch.from_numpy(np.stack([process_frame(img) for img in self.input_images(sample)[0]]))

    @torch.inference_mode()
    def codes(self, frames: torch.Tensor) -> torch.Tensor:
        """The VQGAN codes of each frame, ``(frames, 256)``, one frame at a time as the Sampler encodes."""
        encoder = self.processor.vqgan
        device = encoder.device
        return torch.cat([encoder.codes(frame[None].to(device)).reshape(1, -1).cpu() for frame in frames])

    def visions(self, codes: torch.Tensor) -> list[list[int]]:
        """The token lists of the sample's visions: one per picture, or one of the frames kept under
        video_frames."""
        frames = codes.tolist()
        if self.execution.image_sequence is ImageSequence.VIDEO_FRAMES:
            return [vision_tokens(frames)] if frames else []
        return [vision_tokens([frame]) for frame in frames]

    def render(self, sample: ModelInput) -> str:
        """The text ``construct_input`` tokenizes, each vision written as ``<vision>`` and the numbers of
        its pictures (under ``video_frames`` those kept)."""
        kept = self.kept(sample)
        if self.execution.image_sequence is ImageSequence.VIDEO_FRAMES and kept:
            written = f"{LWM_VISION_START}{' '.join(map(str, kept))}{LWM_VISION_END}"
        else:
            written = "".join(f"{LWM_VISION_START}{k}{LWM_VISION_END}" for k in kept)
        return template_renderer(self.execution.prompt_template)(f"{question(sample)}\n{written}")

    def ids_and_mask(self, sample: ModelInput, codes: torch.Tensor) -> tuple[list[int], list[bool]]:
        """``construct_input``'s tokens and vision mask of one sample."""
        tokenizer = self.processor.tokenizer
        head = tokenizer.encode(f"<s>You are a helpful assistant. USER: {question(sample)}\n")
        start, end = tokenizer.encode(LWM_VISION_START), tokenizer.encode(LWM_VISION_END)
        tail = tokenizer.encode(" ASSISTANT:")
        ids, mask = list(head), [False] * len(head)
        for vision in self.visions(codes):
            ids += start + vision + end
            mask += [False] * len(start) + [True] * len(vision) + [False] * len(end)
        return ids + tail, mask + [False] * len(tail)

    def encode(self, samples: Sequence[ModelInput]) -> BatchFeature:
        rows, masks, frames, codes = [], [], [], []
        for sample in samples:
            pixels = self.frames(sample) if sample.images else torch.zeros(0, 256, 256, 3)
            sample_codes = self.codes(pixels) if sample.images else torch.zeros(0, 256, dtype=torch.long)
            ids, mask = self.ids_and_mask(sample, sample_codes)
            rows.append(ids)
            masks.append(mask)
            frames.append(pixels)
            codes.append(sample_codes)
        features: dict[str, Any] = left_pad(rows, self.processor.tokenizer.pad_token_id)
        width = features["input_ids"].shape[1]
        features["vision_mask"] = torch.tensor([[False] * (width - len(m)) + m for m in masks])
        features["pixel_values"] = torch.cat(frames)
        features["codes"] = torch.cat(codes)
        return BatchFeature(features)

    def images_per_row(self, inputs: BatchFeature) -> list[int]:
        """Pictures of each row: its vision positions over the ids a picture takes."""
        return [int(row.sum()) // self.image_seq for row in inputs["vision_mask"]]

    def split_rows(self, inputs: BatchFeature) -> Iterator[BatchFeature]:
        """Each sample's own ids, mask, vision mask, frames and codes."""
        first = 0
        for i, count in enumerate(self.images_per_row(inputs)):
            keep = inputs["attention_mask"][i].bool()
            yield BatchFeature(
                {
                    "input_ids": inputs["input_ids"][i][keep][None],
                    "attention_mask": inputs["attention_mask"][i][keep][None],
                    "vision_mask": inputs["vision_mask"][i][keep][None],
                    "pixel_values": inputs["pixel_values"][first : first + count],
                    "codes": inputs["codes"][first : first + count],
                }
            )
            first += count

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """The sample's ids with their embeddings, ``vte`` where the vision mask is set."""
        model = cast(LwmForCausalLM, self.model)
        ids, mask = inputs["input_ids"], inputs["vision_mask"].bool()
        embeds = model.multimodal_embeds(ids, mask).to(model.dtype)
        return {"input_ids": ids, "inputs_embeds": embeds, "attention_mask": inputs["attention_mask"]}

    def decoded(self, new_tokens: torch.Tensor) -> list[str]:
        """``Sampler.__call__``'s decoding of the new ids."""
        return self.processor.tokenizer.batch_decode(new_tokens.tolist(), skip_special_tokens=True)
