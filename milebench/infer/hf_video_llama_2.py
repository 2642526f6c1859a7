"""Video-LLaMA-2 (its vision-language branch over Llama-2-7B-Chat, github.com/DAMO-NLP-SG/Video-LLaMA) run
as its original ``Chat`` of ``video_llama/conversation/conversation_video.py`` answers, in MileBench's worker
pattern (the official LLaVA worker: its adjacent-image fix, one sample per ``generate``, greedy with the
benchmark's token limits):

- the turn is ``conv_llava_llama_2`` with the system text ``demo_video.py`` sets for an upload
  (``video_llama_2_chat``): ``[INST] <<SYS>>\\n{system}\\n<</SYS>>\\n\\n{message} [/INST]``, each picture
  written ``<Image><ImageHere></Image> `` as ``Chat.upload_img`` writes it, at its placeholder, the pieces
  that are not blank and the pictures joined by spaces as ``Chat.ask`` joins a question to an upload;
- ``get_context_emb``: the text split at ``<ImageHere>``, each piece tokenized on its own by the slow
  ``LlamaTokenizer`` (BOS only on the first), each piece embedded, each picture's 32 projected video
  queries between two pieces;
- each picture is a one-frame video (``Chat.upload_img``: ``Blip2ImageEvalProcessor()`` at 224 px, then
  ``unsqueeze(2)``) through ``encode_videoQformer_visual`` (``video_llama_2_model``);
- ``Chat.answer``: the embeddings cut to their last ``max_length - max_new_tokens`` positions (its
  ``begin_idx``; ``max_length`` 2000, the spec's ``max_context_len``), the language model's ``generate`` on
  them, stopping at ``</s>`` (its stopping criterion on id 2, the EOS); the answer is the decoded ids as its
  slow tokenizer decodes them with the special tokens kept, cut at ``</s>``, the text after the last
  ``ASSISTANT:``, stripped.

The ``video-frames`` variant (``image_sequence: video_frames``) runs ``Chat.upload_video_without_audio``
instead: the sample's pictures, in order, are the frames of one video written ``<Video><ImageHere></Video> ``
first in the user's message, the prompt without its placeholders after it (``Chat.ask``), all frames through
one ``encode_videoQformer_visual`` (32 tokens for the whole sequence). The original loads a video file with
decord (``load_video``: frames resized to 224 px, and a message of their timestamps); the kit gives it the
pictures at that point, each resized as ``Blip2ImageEvalProcessor`` resizes (224 px, bicubic), with no
timestamp message (pictures have no time), and ``alpro_video_eval``'s transform gives the same pixels as the
picture transform. The frame position embedding has ``max_frame_pos`` rows: a sample with more pictures
fails on its own as context overflow, naming the limit (the original's lookup raises ``IndexError``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import torch
from transformers import BatchFeature

from milebench.infer.adapter import AdapterError
from milebench.infer.hf_cheetor import QFormerLlamaAdapter
from milebench.infer.hf_minigpt_v2 import IMAGE_ID
from milebench.infer.prompt_templates import joined_message, without_pictures
from milebench.infer.records import IMAGE_PLACEHOLDER, ModelInput
from milebench.infer.tiny_cheetor import BLIP2_FILE
from milebench.infer.tiny_minigpt_v2 import EVA_FILE
from milebench.infer.tiny_video_llama_2 import CHECKPOINT_FILE, read_shape
from milebench.infer.video_llama_2_model import VideoLlama, VideoLlamaShape
from milebench.spec.execution import Decoding, ImagePreprocessing, ImageSequence, Tokenization

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-video-llama-2",
    "does": "generate",
    "entry": "HfVideoLlama2Adapter",
    "tiny": {
        "family": "video-llama-2",
        "builder": "milebench.infer.tiny_video_llama_2:build_tiny_video_llama_2",
    },
}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {
    "video_llama_2_chat": """Video-LLaMA-2's ``conv_llava_llama_2`` of ``conversation_video.py``
    (github.com/DAMO-NLP-SG/Video-LLaMA) with the system text ``demo_video.py`` sets for an upload:
    ``[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{message} [/INST]``, the message the text pieces that are not
    blank and one ``<Image><ImageHere></Image> `` per picture (``Chat.upload_img``), joined by spaces as
    ``Chat.ask`` joins them.""",
}
"""The turn formats this module declares (milebench.spec.templates), each rendered by the function of its
name."""

VIDEO_LLAMA_IMAGE = "<Image><ImageHere></Image> "
"""How Video-LLaMA's ``Chat.upload_img`` writes a picture into the user's message (split at
``<ImageHere>``)."""
VIDEO_LLAMA_SYSTEM = (
    "You are able to understand the visual content that the user provides. Follow the instructions "
    "carefully and explain your answers in detail."
)
"""The system text ``demo_video.py`` sets on ``conv_llava_llama_2`` before an image or a video upload."""


VIDEO_LLAMA_VIDEO = "<Video><ImageHere></Video> "
"""How Video-LLaMA's ``Chat.upload_video_without_audio`` writes a video into the user's message (its
``load_video`` message after it, which the kit leaves empty: MileBench's pictures have no timestamps)."""


def video_llama_2_turn(message: str) -> str:
    """``conv_llava_llama_2`` with ``demo_video.py``'s system text and one user message; ``get_prompt``
    strips the leading ``<s>`` separator, so the text starts at ``[INST]``."""
    return f"[INST] <<SYS>>\n{VIDEO_LLAMA_SYSTEM}\n<</SYS>>\n\n{message} [/INST]"


def video_llama_2_chat(prompt: str) -> str:
    """Video-LLaMA-2's turn with its one user message joined as ``Chat.ask`` joins a question to an
    uploaded picture, each picture at its placeholder."""
    return video_llama_2_turn(joined_message(prompt, VIDEO_LLAMA_IMAGE))


def video_llama_2_video(prompt: str) -> str:
    """Video-LLaMA-2's turn after ``Chat.upload_video_without_audio`` and ``Chat.ask``: the one video
    (all of the sample's pictures) first, then the prompt with its placeholders taken out, joined by a
    space as ``Chat.ask`` joins a question to an upload."""
    return video_llama_2_turn(joined_message(IMAGE_PLACEHOLDER + without_pictures(prompt), VIDEO_LLAMA_VIDEO))


NEEDED = {
    CHECKPOINT_FILE: (
        "llama_proj.weight",
        "llama_proj.bias",
        "video_query_tokens",
        "video_frame_position_embedding.weight",
    ),
    BLIP2_FILE: ("query_tokens",),
}
"""Parts the original starts at random and only these files set: without them no run is reproducible."""
ASSISTANT = "ASSISTANT:"
"""``conv_llava_llama_2``'s second role and the colon ``Chat.answer`` cuts the answer after."""


class HfVideoLlama2Adapter(QFormerLlamaAdapter[VideoLlamaShape]):
    """LLaVA's prompting and batching with Video-LLaMA-2's turn, per-piece ids, one-frame videos (or one
    video of all pictures), the answer's cut and decoding."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset(TEMPLATES),
        "image_preprocessing": frozenset({ImagePreprocessing.PROCESSOR}),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
        "image_sequence": frozenset(ImageSequence),
    }
    part_names = (EVA_FILE, BLIP2_FILE, CHECKPOINT_FILE)
    needed = NEEDED
    video_llama: VideoLlama

    def read_shape(self, folder: Path) -> VideoLlamaShape:
        return read_shape(folder)

    def place_model(self) -> None:
        self.video_llama.to(self.device).eval()

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The language model in the execution's dtype on a GPU (float32 on the CPU), then the parts in the
        original's order: the EVA weights, the BLIP-2 checkpoint, the VL checkpoint, each loaded as
        ``load_state_dict(strict=False)`` loads it."""
        llama = self.language_model(source, kwargs)
        model = VideoLlama(self.processor.shape, llama)
        model.load_vision(torch.load(self.parts[EVA_FILE], map_location="cpu", weights_only=True))
        for name in (BLIP2_FILE, CHECKPOINT_FILE):
            self.load_part(model, name)
        self.video_llama = model
        return cast("GenerativeModel", llama)

    @property
    def kept_positions(self) -> int:
        """``Chat.answer``'s ``begin_idx``: the model reads the last ``max_length - max_new_tokens``
        positions of the context (``max_length``, the spec's ``max_context_len``)."""
        budget = self.spec.max_context_len
        if budget is None:
            raise AdapterError(f"model spec {self.spec.name!r}: max_context_len is Chat.answer's max_length")
        return max(budget - self.spec.generation.max_new_tokens, 0)

    @property
    def one_video(self) -> bool:
        """The ``video-frames`` reading: all of a sample's pictures as the frames of one video."""
        return self.execution.image_sequence is ImageSequence.VIDEO_FRAMES

    def render(self, sample: ModelInput) -> str:
        if self.one_video:
            return video_llama_2_video(sample.prompt)
        return super().render(sample)

    def encode(self, samples: Sequence[ModelInput]) -> BatchFeature:
        """The batch as LLaVA's per-chunk encoding makes it, with each row's picture count beside it (one
        image id stands for a whole video in the ``video-frames`` reading)."""
        inputs = super().encode(samples)
        inputs["frames"] = torch.tensor([len(sample.images) for sample in samples])
        return inputs

    def images_per_row(self, inputs: BatchFeature) -> list[int]:
        """Pixel rows per sample: its pictures, one image id each or one video of them all."""
        return [int(n) for n in inputs["frames"].tolist()]

    def split_rows(self, inputs: BatchFeature) -> Iterator[BatchFeature]:
        for i, row in enumerate(super().split_rows(inputs)):
            row["frames"] = inputs["frames"][i : i + 1]
            yield row

    def input_lengths(self, inputs: BatchFeature) -> list[int]:
        """Each row's length against the window: every image id (a picture or a video) becomes the video
        Q-Former's query outputs."""
        extra = self.features_per_image - 1
        lengths = [int(n) for n in inputs["attention_mask"].sum(dim=1).tolist()]
        ids = inputs["input_ids"]
        return [n + int((row == IMAGE_ID).sum()) * extra for n, row in zip(lengths, ids, strict=True)]

    def overflowing(self, samples: Sequence[ModelInput], inputs: BatchFeature) -> dict[int, str]:
        """Beyond the strict variant's refusals, every sample with more frames than the frame position
        embedding has rows (``max_frame_pos``): the original's lookup fails there (``IndexError``)."""
        found = super().overflowing(samples, inputs)
        limit = self.processor.shape.max_frame_pos
        for i, sample in enumerate(samples):
            if self.one_video and len(sample.images) > limit:
                found[i] = (
                    f"model spec {self.spec.name!r}: task {sample.task}, sample {sample.sample_id}: "
                    f"{len(sample.images)} pictures as the frames of one video, but the frame position "
                    f"embedding has {limit} (max_frame_pos)"
                )
        return found

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """The sample's embeddings, each picture a one-frame video (or all of them one video), cut as
        ``Chat.answer`` cuts them."""
        (ids,) = inputs["input_ids"]
        pixels = inputs.get("pixel_values")
        if pixels is None:
            videos = []
        else:
            videos = [pixels] if self.one_video else [picture[None] for picture in pixels]
        with self.autocast():
            embeds = self.video_llama.context_embeds(self.chunks(ids), videos)
        expanded = self.expanded(ids)
        begin = max(expanded.shape[0] - self.kept_positions, 0)
        kept = expanded[begin:][None]
        return {
            "input_ids": kept,
            "inputs_embeds": embeds[begin:][None].to(self.model.dtype),
            "attention_mask": torch.ones_like(kept),
        }

    def clean(self, text: str) -> str:
        """``Chat.answer``'s decoding: the text before ``</s>``, after the last ``ASSISTANT:``, stripped."""
        return text.split("</s>")[0].split(ASSISTANT)[-1].strip()
