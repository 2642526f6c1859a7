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

The ``video-frames`` variant of the spec (every picture a frame of one video, ``Chat.upload_video``) is not
implemented: the adapter supports ``image_sequence: images`` only and refuses it by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import torch
from tokenizers import BertWordPieceTokenizer
from transformers import BatchFeature

from milebench.infer.adapter import AdapterError
from milebench.infer.hf_cheetor import QFormerLlamaAdapter
from milebench.infer.stopping import RowStop
from milebench.infer.tiny_videochat2 import BERT_VOCAB_FILE, CHECKPOINT_FILE, UMT_FILE, read_shape
from milebench.infer.videochat2_model import VideoChat2, VideoChat2Shape
from milebench.spec.execution import Decoding, ImagePreprocessing, ImageSequence, PromptTemplate, Tokenization

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-videochat2",
    "does": "generate",
    "entry": "HfVideoChat2Adapter",
    "tiny": {"family": "videochat2", "builder": "milebench.infer.tiny_videochat2:build_tiny_videochat2"},
}
"""What this module runs (milebench.spec.adapters)."""

NEEDED = {
    CHECKPOINT_FILE: ("llama_proj.weight", "llama_proj.bias", "extra_query_tokens"),
    UMT_FILE: ("query_tokens", "vision_layernorm.weight"),
}
"""Parts the original starts at random or fresh and only these files set: without them no run is
reproducible."""
IMAGE_INSTRUCTION = "Observe the image and answer the question."
"""What ``Chat.upload_img`` gives ``encode_img`` for the Q-Former's text input."""
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


class HfVideoChat2Adapter(QFormerLlamaAdapter[VideoChat2Shape]):
    """LLaVA's prompting and batching with VideoChat2's conversation, per-piece ids, one-frame pictures with
    the Q-Former's instruction, its stop ids and the answer's cut and decoding."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset({PromptTemplate.VIDEOCHAT2}),
        "image_preprocessing": frozenset({ImagePreprocessing.PROCESSOR}),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
        "image_sequence": frozenset({ImageSequence.IMAGES}),
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
        self.instruction = self.instruction_ids()
        return cast("GenerativeModel", llama)

    def instruction_ids(self) -> torch.Tensor:
        """``Blip2Base.init_tokenizer``'s BERT tokenizer (lower-casing WordPiece over the vocabulary,
        ``[DEC]`` added, which the instruction never holds) on ``IMAGE_INSTRUCTION``: ``[CLS]``, the
        words, ``[SEP]``."""
        vocab = self.parts[BERT_VOCAB_FILE]
        if not vocab.is_file():
            raise AdapterError(f"model spec {self.spec.name!r}: no BERT vocabulary at {vocab}")
        tokenizer = BertWordPieceTokenizer(str(vocab), lowercase=True)
        ids = tokenizer.encode(IMAGE_INSTRUCTION).ids
        if tokenizer.token_to_id("[UNK]") in ids:
            raise AdapterError(f"model spec {self.spec.name!r}: {vocab} lacks words of {IMAGE_INSTRUCTION!r}")
        return torch.tensor(ids)

    def stopper(self, inputs: BatchFeature) -> RowStop | None:
        """``Chat.answer``'s stop rule, judged after the prompt ``generate`` is given (each picture's
        positions counted)."""
        return StopIds(int(self.expanded(inputs["input_ids"][0]).shape[0]))

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """The sample's embeddings, each picture a one-frame input."""
        (ids,) = inputs["input_ids"]
        pixels = inputs.get("pixel_values")
        pictures = [] if pixels is None else list(pixels)
        with self.autocast():
            embeds = self.videochat2.context_embeds(self.chunks(ids), pictures, self.instruction)
        expanded = self.expanded(ids)[None]
        return {
            "input_ids": expanded,
            "inputs_embeds": embeds[None].to(self.model.dtype),
            "attention_mask": torch.ones_like(expanded),
        }

    def clean(self, text: str) -> str:
        """``Chat.answer``'s decoding: the text before ``###``, after the last ``Assistant:``, stripped."""
        return text.split("###")[0].split(ASSISTANT)[-1].strip()
