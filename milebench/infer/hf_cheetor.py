"""Cheetor (its LLaMA2-chat checkpoint, github.com/DCDmllm/Cheetah) run as its original code answers a
benchmark (``Chat.batch_answer`` of ``cheetah/conversation/conversation_llama2.py``, which
``i4_cheetah_llama2.py`` calls on the DEMON benchmark), in MileBench's worker pattern (the official LLaVA
worker: its adjacent-image fix, one sample per ``generate``, greedy with the benchmark's token limits):

- the turn is ``CONV_VISION`` of ``conversation_llama2.py`` as ``batch_answer`` fills it from the
  ``<ImageHere>`` placeholders (``cheetor_llama2``): ``[INST] <<SYS>>\\n\\n<</SYS>>\\n\\n{message} [/INST]``,
  each picture ``<Img><HereForImage></Img>`` in the message, blank pieces dropped, the rest joined by
  spaces;
- ``batch_get_context_emb``: the text split at ``<HereForImage>``, each piece tokenized on its own by the
  slow ``LlamaTokenizer`` (BOS only on the first), each piece embedded, each picture's 32 Q-Former
  outputs between two pieces;
- pictures go through ``blip2_image_eval`` at 224 px (the model config's ``preprocess``; MiniGPT-v2's
  transform), then ``encode_img``; VPG-C runs in the language model's prompt pass (``cheetor_model``);
- the language model's ``generate`` on the embeddings, stopping at ``</s>`` (its stopping criterion, the
  EOS), on a GPU under bf16 autocast with the LLM in bfloat16 and the ViT, Q-Former and projections in
  float32 (``vit_precision: bf16`` converts nothing); the answer is the decoded ids as its slow tokenizer
  decodes them with the special tokens kept (a space before a special token after text), cut at
  ``</s>``, not stripped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import torch
from transformers import AutoTokenizer, BatchFeature, LlamaForCausalLM

from milebench.infer.adapter import AdapterError
from milebench.infer.cheetor_model import Cheetor, CheetorShape
from milebench.infer.hf_image_text_to_text import DTYPE_ARGUMENT
from milebench.infer.hf_minigpt_v2 import IMAGE_ID, Blip2ImageEval, EvaLlamaAdapter
from milebench.infer.stopping import RowStop
from milebench.infer.tiny_cheetor import BLIP2_FILE, CHECKPOINT_FILE, read_shape
from milebench.infer.tiny_minigpt_v2 import EVA_FILE
from milebench.records import IMAGE_PLACEHOLDER
from milebench.spec.execution import Decoding, ImagePreprocessing, PromptTemplate, Tokenization

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-cheetor",
    "does": "generate",
    "entry": "HfCheetorAdapter",
    "tiny": {"family": "cheetor", "builder": "milebench.infer.tiny_cheetor:build_tiny_cheetor"},
}
"""What this module runs (milebench.spec.adapters)."""

IMAGE_MARKER = "<HereForImage>"
"""Where ``batch_get_context_emb`` splits the turn."""
NEEDED = {
    CHECKPOINT_FILE: ("llama_proj.weight", "llama_proj.bias"),
    BLIP2_FILE: ("query_tokens",),
}
"""Parts the original starts at random and only these files set: without them no run is reproducible."""


@dataclass(frozen=True)
class CheetorProcessor:
    """What builds Cheetor's inputs: the Llama tokenizer, the picture transform and the sizes."""

    tokenizer: Any
    image_processor: Blip2ImageEval
    shape: CheetorShape
    image_token: str = IMAGE_PLACEHOLDER
    image_token_id: int = IMAGE_ID


def slow_llama_text(tokenizer: Any, ids: list[int]) -> str:
    """``LlamaTokenizer.decode`` of transformers 4.31 with the special tokens kept: the pieces between
    special tokens decoded as SentencePiece decodes them, and a special token after text written with a
    space before the text (its ``convert_tokens_to_string``)."""
    special = set(tokenizer.all_special_ids)
    out, run, after_special = "", list[int](), False
    for i, token in enumerate(ids):
        if token in special:
            out += (" " if not after_special and i else "") + tokenizer.decode(run)
            out += tokenizer.convert_ids_to_tokens(token)
            run, after_special = [], True
        else:
            run.append(token)
            after_special = False
    return out + tokenizer.decode(run)


class HfCheetorAdapter(EvaLlamaAdapter):
    """LLaVA's prompting and batching with Cheetor's turn, per-piece ids, embeddings, VPG-C and decoding."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset({PromptTemplate.CHEETOR_LLAMA2}),
        "image_preprocessing": frozenset({ImagePreprocessing.PROCESSOR}),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
    }
    part_names = (EVA_FILE, BLIP2_FILE, CHECKPOINT_FILE)
    image_marker = IMAGE_MARKER
    processor: CheetorProcessor
    cheetor: Cheetor

    @property
    def features_per_image(self) -> int:
        return self.processor.shape.features_per_image

    @property
    def feature_source(self) -> str:
        return self.processor.shape.feature_source

    def place_model(self) -> None:
        self.cheetor.to(self.device).eval()

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> CheetorProcessor:
        shape = read_shape(Path(source)) if Path(source).is_dir() else CheetorShape()
        return CheetorProcessor(
            tokenizer=AutoTokenizer.from_pretrained(source, **kwargs),
            image_processor=Blip2ImageEval(shape.image_size),
            shape=shape,
        )

    def part_state(self, name: str) -> dict[str, torch.Tensor]:
        saved = torch.load(self.parts[name], map_location="cpu", weights_only=True)
        state: dict[str, torch.Tensor] = saved.get("model", saved)
        missing = [key for key in NEEDED.get(name, ()) if key not in state]
        if missing:
            raise AdapterError(f"model spec {self.spec.name!r}: {self.parts[name]} holds no {missing}")
        return state

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The language model in the execution's dtype on a GPU (float32 on the CPU), then the parts in
        the original's order: the EVA weights, the BLIP-2 checkpoint (its query tokens also as VPG-C's),
        the Cheetor checkpoint, each loaded as ``load_state_dict(strict=False)`` loads it."""
        on_gpu = self.device.type == "cuda"
        dtype = getattr(torch, self.execution.dtype.value) if on_gpu else torch.float32
        llama = LlamaForCausalLM.from_pretrained(source, **{DTYPE_ARGUMENT: dtype, **kwargs})
        cheetor = Cheetor(self.processor.shape, llama)
        cheetor.load_vision(torch.load(self.parts[EVA_FILE], map_location="cpu", weights_only=True))
        blip2 = self.part_state(BLIP2_FILE)
        where = f"model spec {self.spec.name!r}:"
        cheetor.load_parts(blip2, f"{where} {self.parts[BLIP2_FILE]}")
        cheetor.load_blip2_query_tokens(blip2)
        cheetor.load_parts(self.part_state(CHECKPOINT_FILE), f"{where} {self.parts[CHECKPOINT_FILE]}")
        self.cheetor = cheetor
        return cast("GenerativeModel", llama)

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """The sample's embeddings; VPG-C armed with its pictures' features and places for the
        ``generate`` that follows."""
        (ids,) = inputs["input_ids"]
        with self.autocast():
            embeds, vpg = self.cheetor.context_embeds(self.chunks(ids), inputs.get("pixel_values"))
        self.cheetor.arm(vpg)
        expanded = self.expanded(ids)[None]
        return {
            "input_ids": expanded,
            "inputs_embeds": embeds[None],
            "attention_mask": torch.ones_like(expanded),
        }

    def new_tokens(self, inputs: BatchFeature, stop: RowStop | None) -> torch.Tensor:
        try:
            return super().new_tokens(inputs, stop)
        finally:
            self.cheetor.disarm()

    def decoded(self, new_tokens: torch.Tensor) -> list[str]:
        return [slow_llama_text(self.processor.tokenizer, row) for row in new_tokens.tolist()]

    def clean(self, text: str) -> str:
        """``batch_answer``'s decoding: the text before ``</s>``, not stripped."""
        return text.split("</s>")[0]
