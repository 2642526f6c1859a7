"""VideoChat2 (its 7B stage-3 chat model over Vicuna-7B-v0, github.com/OpenGVLab/Ask-Anything,
``video_chat2``) run as its original ``Chat`` of ``conversation.py`` answers, in MileBench's worker pattern
(the official LLaVA worker: its adjacent-image fix, one sample per ``generate``, greedy with the benchmark's
token limits):

- the conversation is ``demo.py``'s state (system text empty, separator ``###``, roles ``Human`` and
  ``Assistant``) rendered by ``get_prompt``: each text piece that is not blank a message of its own
  (``Chat.ask``: the text and a newline), each picture one (``Chat.upload_img``:
  ``<Image><ImageHere></Image>\\n``), at its placeholder, then ``###Assistant:`` (``videochat2``);
- ``get_context_emb``: the text split at ``<ImageHere>``, each piece tokenized on its own by the slow
  ``LlamaTokenizer`` (BOS only on the first), each piece embedded, each picture's 96 projected queries
  between two pieces;
- each picture is a one-frame input (``Chat.upload_img``: PIL's bicubic resize to 224 px, ``ToTensor``,
  CLIP's normalisation, ``unsqueeze(0).unsqueeze(0)``) through ``encode_img`` with the instruction
  ``Observe the image and answer the question.`` in the Q-Former (``videochat2_model``);
- ``Chat.answer``: the language model's ``generate`` on the embeddings, stopping at ``</s>`` (the EOS) or
  when the ids end with ``[835]`` or ``[2277, 29937]`` (its ``StoppingCriteriaSub``, ``###`` in Vicuna's
  vocabulary); the answer is the ids decoded as its slow tokenizer decodes them, cut at ``###``, the text
  after the last ``Assistant:``, stripped.

The ``video-frames`` variant (``image_sequence: video_frames``) runs ``Chat.upload_video`` instead, as
``demo.py`` feeds a video upload and then a question: the sample's pictures, in order, are the frames of one
video written ``<Video><VideoHere></Video>\n`` as the first ``Human`` message, the prompt without its
placeholders one more after it (``Chat.ask``), and ``get_context_emb`` splits the text at ``<VideoHere>``
(``videochat2_video``). The original decodes a video file at that point (``Chat.load_video``: decord,
``num_segments`` frames picked by ``get_index``); the kit gives the pictures as the decoded frames, every
picture once (``num_segments`` the picture count), and applies ``load_video``'s own transform to them
(``VideoFrames``: the shorter side resized to 224 px, bicubic, a centred 224 px crop, CLIP's
normalisation), not ``upload_img``'s square resize. All frames go through one ``encode_img`` with the
instruction ``Watch the video and answer the question.``: the UMT position table of four frames resized
along time to the frame count (``get_sinusoid_encoding_table``; a one-picture video is a one-frame input
and takes the picture table, ``encode_img``'s ``use_image``), 96 tokens for the whole sequence. The
original has no frame limit (the table resizes to any count): the only limit is the window, counted and
enforced as in the paper's reading (``input_lengths``: each image id its 96 positions).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
import torch
from PIL import Image
from tokenizers import BertWordPieceTokenizer
from transformers import BatchFeature

from milebench.infer.adapter import AdapterError
from milebench.infer.hf_cheetor import QFormerLlamaAdapter
from milebench.infer.hf_llava import left_pad
from milebench.infer.hf_minigpt_v2 import CLIP_MEAN, CLIP_STD, IMAGE_ID
from milebench.infer.prompt_templates import without_pictures
from milebench.infer.records import IMAGE_PLACEHOLDER, ModelInput
from milebench.infer.stopping import RowStop
from milebench.infer.tiny_videochat2 import BERT_VOCAB_FILE, CHECKPOINT_FILE, UMT_FILE, read_shape
from milebench.infer.videochat2_model import VideoChat2, VideoChat2Shape
from milebench.spec.execution import Decoding, ImagePreprocessing, ImageSequence, Tokenization

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-videochat2",
    "does": "generate",
    "entry": "HfVideoChat2Adapter",
    "tiny": {"family": "videochat2", "builder": "milebench.infer.tiny_videochat2:build_tiny_videochat2"},
}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {
    "videochat2": """VideoChat2's conversation of ``conversation.py`` (github.com/OpenGVLab/Ask-Anything,
    ``video_chat2``) as its ``Chat`` builds it over the demo's state: ``###Human: {message}###`` per message
    (each text piece that is not blank, with ``Chat.ask``'s newline, and each picture's
    ``<Image><ImageHere></Image>\n`` a message of its own), then ``Assistant:``; the system text is empty.""",
}
"""The turn formats this module declares (milebench.spec.templates), each rendered by the function of its
name."""

VIDEOCHAT2_IMAGE = "<Image><ImageHere></Image>\n"
"""How VideoChat2's ``Chat.upload_img`` writes a picture as a user message (split at ``<ImageHere>``)."""


def videochat2(prompt: str) -> str:
    """VideoChat2's conversation as its ``Chat`` builds it (``conversation.py``: ``get_prompt`` over the
    demo's state, system text empty, separator ``###``, roles ``Human`` and ``Assistant``): each text piece
    between ``<ImageHere>`` placeholders that is not blank a ``Human`` message of its own (``Chat.ask``
    appends a newline), each picture one (``Chat.upload_img``), in order, then the open ``Assistant:``."""
    pieces = prompt.split("<ImageHere>")
    messages: list[str] = []
    for i, piece in enumerate(pieces):
        messages += [piece + "\n"] if piece.strip() else []
        messages += [VIDEOCHAT2_IMAGE] if i < len(pieces) - 1 else []
    return "###" + "".join(f"Human: {message}###" for message in messages) + "Assistant:"


VIDEOCHAT2_VIDEO_MARKER = "<VideoHere>"
"""Where ``Chat.get_context_emb`` splits a text that holds a video (and then only there)."""
VIDEOCHAT2_VIDEO = f"<Video>{VIDEOCHAT2_VIDEO_MARKER}</Video>\n"
"""How VideoChat2's ``Chat.upload_video`` writes a video as a user message."""


def videochat2_video(prompt: str) -> str:
    """VideoChat2's conversation after ``demo.py``'s video upload and one question: the video
    (``Chat.upload_video``, all of the sample's pictures; none without pictures) as the first ``Human``
    message, then the prompt with its placeholders taken out as one more (``Chat.ask``, where not blank),
    then the open ``Assistant:``."""
    question = without_pictures(prompt)
    messages = [VIDEOCHAT2_VIDEO] if IMAGE_PLACEHOLDER in prompt else []
    messages += [question + "\n"] if question.strip() else []
    return "###" + "".join(f"Human: {message}###" for message in messages) + "Assistant:"


NEEDED = {
    CHECKPOINT_FILE: ("llama_proj.weight", "llama_proj.bias", "extra_query_tokens"),
    UMT_FILE: ("query_tokens", "vision_layernorm.weight"),
}
"""Parts the original starts at random or fresh and only these files set: without them no run is
reproducible."""
IMAGE_INSTRUCTION = "Observe the image and answer the question."
"""What ``Chat.upload_img`` gives ``encode_img`` for the Q-Former's text input."""
VIDEO_INSTRUCTION = "Watch the video and answer the question."
"""What ``Chat.upload_video`` gives it."""
STOP_IDS = ((835,), (2277, 29937))
"""``Chat.__init__``'s stop words: ``###`` as Vicuna's tokenizer writes it, one id or two."""
ASSISTANT = "Assistant:"
"""The second role and the colon ``Chat.answer`` cuts the answer after."""


class StopIds(RowStop):
    """``StoppingCriteriaSub``: done when the generated ids end with one of ``STOP_IDS``."""

    def __init__(self, prompt_len: int) -> None:
        super().__init__((), None, prompt_len)

    def row_done(self, new: torch.Tensor) -> bool:
        ids = new[0].tolist()
        return any(len(ids) >= len(stop) and tuple(ids[-len(stop) :]) == stop for stop in STOP_IDS)


@dataclass(frozen=True)
class VideoFrames:
    """``Chat.load_video``'s transform of a video's decoded frames, computed as its code computes it on PIL
    pictures: ``GroupScale`` (torchvision's ``Resize``: the shorter side to ``image_size``, the longer
    ``int(image_size * long / short)``, PIL's bicubic), ``GroupCenterCrop`` (the crop's corner rounded from
    the halved margins), ``Stack`` and ``ToTorchFormatTensor`` (bytes / 255 in float32), ``GroupNormalize``
    (each channel minus the mean, over the std); returns (frames, 3, H, W)."""

    image_size: int
    image_mean: tuple[float, ...] = CLIP_MEAN
    image_std: tuple[float, ...] = CLIP_STD

    def frame(self, picture: Image.Image) -> np.ndarray:
        side = self.image_size
        width, height = picture.size
        short, long = sorted((width, height))
        scaled = (side, int(side * long / short)) if width <= height else (int(side * long / short), side)
        if scaled != (width, height):
            picture = picture.resize(scaled, Image.Resampling.BICUBIC)
        width, height = picture.size
        top, left = round((height - side) / 2.0), round((width - side) / 2.0)
        return np.array(picture.convert("RGB").crop((left, top, left + side, top + side)), dtype=np.uint8)

    def __call__(self, images: Sequence[Image.Image], return_tensors: str = "pt") -> dict[str, torch.Tensor]:
        stacked = np.concatenate([self.frame(picture) for picture in images], axis=2)
        tensor = torch.from_numpy(stacked).permute(2, 0, 1).contiguous().float().div(255)
        for channel, mean, std in zip(
            tensor, self.image_mean * len(images), self.image_std * len(images), strict=True
        ):
            channel.sub_(mean).div_(std)
        return {"pixel_values": tensor.view(len(images), 3, self.image_size, self.image_size)}


class HfVideoChat2Adapter(QFormerLlamaAdapter[VideoChat2Shape]):
    """LLaVA's prompting and batching with VideoChat2's conversation, per-piece ids, one-frame pictures (or
    one video of all pictures) with the Q-Former's instruction, its stop ids and the answer's cut and
    decoding."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset(TEMPLATES),
        "image_preprocessing": frozenset({ImagePreprocessing.PROCESSOR}),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
        "image_sequence": frozenset(ImageSequence),
    }
    part_names = (UMT_FILE, CHECKPOINT_FILE, BERT_VOCAB_FILE)
    needed = NEEDED
    videochat2: VideoChat2

    def read_shape(self, folder: Path) -> VideoChat2Shape:
        return read_shape(folder)

    def place_model(self) -> None:
        self.videochat2.to(self.device).eval()

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The language model in the execution's dtype on a GPU (float32 on the CPU), then the parts in the
        demo's order: the UMT and Q-Former file, the stage-3 checkpoint (LoRA pairs included), each loaded
        as ``load_state_dict(strict=False)`` loads it; and the instruction's BERT ids."""
        llama = self.language_model(source, kwargs)
        model = VideoChat2(self.processor.shape, llama)
        for name in (UMT_FILE, CHECKPOINT_FILE):
            self.load_part(model, name)
        self.videochat2 = model
        self.instruction = self.instruction_ids(VIDEO_INSTRUCTION if self.one_video else IMAGE_INSTRUCTION)
        return cast("GenerativeModel", llama)

    @property
    def one_video(self) -> bool:
        """The ``video-frames`` reading: all of a sample's pictures as the frames of one video."""
        return self.execution.image_sequence is ImageSequence.VIDEO_FRAMES

    def instruction_ids(self, instruction: str) -> torch.Tensor:
        """``Blip2Base.init_tokenizer``'s BERT tokenizer (lower-casing WordPiece over the vocabulary,
        ``[DEC]`` added, which the instruction never holds) on the upload's instruction: ``[CLS]``, the
        words, ``[SEP]``."""
        vocab = self.parts[BERT_VOCAB_FILE]
        if not vocab.is_file():
            raise AdapterError(f"model spec {self.spec.name!r}: no BERT vocabulary at {vocab}")
        tokenizer = BertWordPieceTokenizer(str(vocab), lowercase=True)
        ids = tokenizer.encode(instruction).ids
        if tokenizer.token_to_id("[UNK]") in ids:
            raise AdapterError(f"model spec {self.spec.name!r}: {vocab} lacks words of {instruction!r}")
        return torch.tensor(ids)

    def render(self, sample: ModelInput) -> str:
        if self.one_video:
            return videochat2_video(sample.prompt)
        return super().render(sample)

    def token_ids(self, text: str) -> list[int]:
        """BOS, then each piece's ids with ``IMAGE_ID`` between pieces; a text with a video is split at its
        ``<VideoHere>`` only, as ``get_context_emb`` splits it."""
        if VIDEOCHAT2_VIDEO_MARKER not in text:
            return super().token_ids(text)
        tokenizer = self.processor.tokenizer
        ids = [tokenizer.bos_token_id]
        for i, piece in enumerate(text.split(VIDEOCHAT2_VIDEO_MARKER)):
            ids += [IMAGE_ID] if i else []
            ids += list(tokenizer(piece, add_special_tokens=False).input_ids)
        return ids

    def encode(self, samples: Sequence[ModelInput]) -> BatchFeature:
        """The batch as LLaVA's per-chunk encoding makes it; in the ``video-frames`` reading with each
        row's picture count beside it (one image id stands for a whole video)."""
        inputs = super().encode(samples)
        if self.one_video:
            inputs["frames"] = torch.tensor([len(sample.images) for sample in samples])
        return inputs

    def assemble(self, rows: Sequence[tuple[list[int], list[Image.Image]]]) -> BatchFeature:
        """The paper's reading: LLaVA's batch. The ``video-frames`` reading: each row's pictures through
        ``load_video``'s transform as one video's frames, the rows' frames in row order."""
        if not self.one_video:
            return super().assemble(rows)
        features: dict[str, Any] = left_pad([ids for ids, _ in rows], self.processor.tokenizer.pad_token_id)
        transform = VideoFrames(self.processor.shape.image_size)
        videos = [transform(pictures)["pixel_values"] for _, pictures in rows if pictures]
        if videos:
            features["pixel_values"] = torch.cat(videos)
        return BatchFeature(features)

    def images_per_row(self, inputs: BatchFeature) -> list[int]:
        """Pixel rows per sample: one per image id, or in the ``video-frames`` reading the video's
        frames."""
        if not self.one_video:
            return super().images_per_row(inputs)
        return [int(n) for n in inputs["frames"].tolist()]

    def split_rows(self, inputs: BatchFeature) -> Iterator[BatchFeature]:
        for i, row in enumerate(super().split_rows(inputs)):
            if self.one_video:
                row["frames"] = inputs["frames"][i : i + 1]
            yield row

    def input_lengths(self, inputs: BatchFeature) -> list[int]:
        """Each row's length against the window: every image id (a picture, or the one video) becomes the
        Q-Former's 96 query outputs."""
        if not self.one_video:
            return super().input_lengths(inputs)
        extra = self.features_per_image - 1
        lengths = [int(n) for n in inputs["attention_mask"].sum(dim=1).tolist()]
        ids = inputs["input_ids"]
        return [n + int((row == IMAGE_ID).sum()) * extra for n, row in zip(lengths, ids, strict=True)]

    def stopper(self, inputs: BatchFeature) -> RowStop | None:
        """``Chat.answer``'s stop rule, judged after the prompt ``generate`` is given (each picture's
        positions counted)."""
        return StopIds(int(self.expanded(inputs["input_ids"][0]).shape[0]))

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """The sample's embeddings, each picture a one-frame input (or all of them one video)."""
        (ids,) = inputs["input_ids"]
        pixels = inputs.get("pixel_values")
        if pixels is None:
            visuals = []
        else:
            visuals = [pixels] if self.one_video else [picture[None] for picture in pixels]
        with self.autocast():
            embeds = self.videochat2.context_embeds(self.chunks(ids), visuals, self.instruction)
        expanded = self.expanded(ids)[None]
        return {
            "input_ids": expanded,
            "inputs_embeds": embeds[None].to(self.model.dtype),
            "attention_mask": torch.ones_like(expanded),
        }

    def clean(self, text: str) -> str:
        """``Chat.answer``'s decoding: the text before ``###``, after the last ``Assistant:``, stripped."""
        return text.split("###")[0].split(ASSISTANT)[-1].strip()
