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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, cast

import torch
from transformers import AutoTokenizer, BatchFeature, LlamaForCausalLM

from milebench.infer.adapter import AdapterError
from milebench.infer.cheetor_model import Cheetor, CheetorShape
from milebench.infer.hf_image_text_to_text import DTYPE_ARGUMENT
from milebench.infer.hf_minigpt_v2 import IMAGE_ID, Blip2ImageEval, EvaLlamaAdapter
from milebench.infer.prompt_templates import joined_message
from milebench.infer.records import IMAGE_PLACEHOLDER
from milebench.infer.stopping import RowStop
from milebench.infer.tiny_cheetor import BLIP2_FILE, CHECKPOINT_FILE, read_shape
from milebench.infer.tiny_minigpt_v2 import EVA_FILE
from milebench.spec.execution import Decoding, ImagePreprocessing, Tokenization

if TYPE_CHECKING:
    from milebench.infer.hf_image_text_to_text import GenerativeModel


ADAPTER = {
    "kind": "hf-cheetor",
    "does": "generate",
    "entry": "HfCheetorAdapter",
    "tiny": {"family": "cheetor", "builder": "milebench.infer.tiny_cheetor:build_tiny_cheetor"},
}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {
    "cheetor_llama2": """Cheetor's ``CONV_VISION`` of ``conversation_llama2.py`` (github.com/DCDmllm/Cheetah)
    as ``Chat.batch_answer`` fills it: the text pieces between placeholders that are not blank and one
    ``<Img><HereForImage></Img>`` per picture, joined by spaces, in ``[INST] <<SYS>>\n\n<</SYS>>\n\n{message}
    [/INST]`` (its empty system text).""",
}
"""The turn formats this module declares (milebench.spec.templates), each rendered by the function of its
name."""

CHEETOR_IMAGE = "<Img><HereForImage></Img>"
"""How Cheetor's ``Chat`` writes a picture into the user's message (split at ``<HereForImage>``)."""


def cheetor_llama2(prompt: str) -> str:
    """Cheetor's LLaMA2 turn as ``Chat.batch_answer`` builds it from a prompt with ``<ImageHere>``
    placeholders: a piece that is blank is dropped (``ask`` is skipped), the rest and the pictures are
    joined by spaces into the one user message, the system text is empty."""
    return f"[INST] <<SYS>>\n\n<</SYS>>\n\n{joined_message(prompt, CHEETOR_IMAGE)} [/INST]"


IMAGE_MARKER = "<HereForImage>"
"""Where ``batch_get_context_emb`` splits the turn."""
NEEDED = {
    CHECKPOINT_FILE: ("llama_proj.weight", "llama_proj.bias"),
    BLIP2_FILE: ("query_tokens",),
}
"""Parts the original starts at random and only these files set: without them no run is reproducible."""


class PartsShape(Protocol):
    """The sizes a Q-Former model's parts fix: its picture size and its language-model tokens per picture."""

    @property
    def image_size(self) -> int: ...

    @property
    def features_per_image(self) -> int: ...

    @property
    def feature_source(self) -> str: ...


Shape = TypeVar("Shape", bound=PartsShape)


class PartsModel(Protocol):
    """A Q-Former model that loads a part file's keys it has (``load_state_dict(strict=False)``)."""

    def load_parts(self, state: dict[str, torch.Tensor], source: str) -> list[str]: ...


@dataclass(frozen=True)
class QFormerLlamaProcessor(Generic[Shape]):
    """What builds a Q-Former model's inputs: the Llama tokenizer, the picture transform and the sizes."""

    tokenizer: Any
    image_processor: Blip2ImageEval
    shape: Shape
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


class QFormerLlamaAdapter(EvaLlamaAdapter, Generic[Shape]):
    """What the BLIP-2 Q-Former models over Llama-2-chat (Cheetor, Video-LLaMA-2) share: sizes read beside
    the language model (a tiny checkpoint's) or the original's constants, part files that must hold the
    keys only they set, and the answer decoded as the slow tokenizer of their time decodes it."""

    needed: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    """Per part file, keys the original starts at random and only that file sets."""
    processor: QFormerLlamaProcessor[Shape]

    @property
    def features_per_image(self) -> int:
        return self.processor.shape.features_per_image

    @property
    def feature_source(self) -> str:
        return self.processor.shape.feature_source

    def read_shape(self, folder: Path) -> Shape:
        """The sizes of the checkpoint in ``folder`` (the original's constants where it states none)."""
        raise NotImplementedError

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> QFormerLlamaProcessor[Shape]:
        """The checkpoint's Llama tokenizer (a SentencePiece model, which needs the ``minigpt-v2`` extra's
        libraries where no ``tokenizer.json`` comes with it) and the picture transform at its size."""
        shape = self.read_shape(Path(source))
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        except ImportError as err:
            raise AdapterError(
                f"model spec {self.spec.name!r}: the tokenizer of {source} cannot be loaded ({err}); "
                "its SentencePiece libraries: pip install -e '.[minigpt-v2]'"
            ) from err
        return QFormerLlamaProcessor(
            tokenizer=tokenizer,
            image_processor=Blip2ImageEval(shape.image_size),
            shape=shape,
        )

    def part_state(self, name: str) -> dict[str, torch.Tensor]:
        saved = torch.load(self.parts[name], map_location="cpu", weights_only=True)
        state: dict[str, torch.Tensor] = saved.get("model", saved)
        missing = [key for key in self.needed.get(name, ()) if key not in state]
        if missing:
            raise AdapterError(f"model spec {self.spec.name!r}: {self.parts[name]} holds no {missing}")
        return state

    def language_model(self, source: str, kwargs: dict[str, Any]) -> LlamaForCausalLM:
        """The language model in the execution's dtype on a GPU, in float32 on the CPU."""
        on_gpu = self.device.type == "cuda"
        dtype = getattr(torch, self.execution.dtype.value) if on_gpu else torch.float32
        options = {DTYPE_ARGUMENT: dtype, **kwargs}
        llama: LlamaForCausalLM = LlamaForCausalLM.from_pretrained(source, **options)
        return llama

    def load_part(self, model: PartsModel, name: str) -> dict[str, torch.Tensor]:
        """The part file ``name`` loaded into ``model`` as the original's ``load_state_dict(strict=False)``
        loads it; returns the file's state."""
        state = self.part_state(name)
        model.load_parts(state, f"model spec {self.spec.name!r}: {self.parts[name]}")
        return state

    def decoded(self, new_tokens: torch.Tensor) -> list[str]:
        return [slow_llama_text(self.processor.tokenizer, row) for row in new_tokens.tolist()]


class HfCheetorAdapter(QFormerLlamaAdapter[CheetorShape]):
    """LLaVA's prompting and batching with Cheetor's turn, per-piece ids, embeddings, VPG-C and decoding."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset(TEMPLATES),
        "image_preprocessing": frozenset({ImagePreprocessing.PROCESSOR}),
        "tokenization": frozenset({Tokenization.PER_CHUNK}),
        "decoding": frozenset({Decoding.PER_SAMPLE}),
    }
    part_names = (EVA_FILE, BLIP2_FILE, CHECKPOINT_FILE)
    image_marker = IMAGE_MARKER
    needed = NEEDED
    cheetor: Cheetor

    def read_shape(self, folder: Path) -> CheetorShape:
        return read_shape(folder)

    def place_model(self) -> None:
        self.cheetor.to(self.device).eval()

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The language model in the execution's dtype on a GPU (float32 on the CPU), then the parts in
        the original's order: the EVA weights, the BLIP-2 checkpoint (its query tokens also as VPG-C's),
        the Cheetor checkpoint, each loaded as ``load_state_dict(strict=False)`` loads it."""
        llama = self.language_model(source, kwargs)
        cheetor = Cheetor(self.processor.shape, llama)
        cheetor.load_vision(torch.load(self.parts[EVA_FILE], map_location="cpu", weights_only=True))
        cheetor.load_blip2_query_tokens(self.load_part(cheetor, BLIP2_FILE))
        self.load_part(cheetor, CHECKPOINT_FILE)
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

    def clean(self, text: str) -> str:
        """``batch_answer``'s decoding: the text before ``</s>``, not stripped."""
        return text.split("</s>")[0]
