"""Mantis (TIGER-Lab/Mantis-bakllava-7b) run as its own code runs a multi-image prompt:
github.com/TIGER-AI-Lab/Mantis, ``chat_mllava`` (``mantis/models/mllava/utils.py``) over its
``MLlavaProcessor`` (``mantis/models/mllava/processing_llava.py``), as of the checkpoint's release
(May 2024; unchanged since in what follows).

In MileBench's worker pattern (the official LLaVA worker: its adjacent-image fix, each ``<ImageHere>``
becomes the image token in place, here ``chat_mllava``'s ``<image>``; one sample per ``generate``, greedy
with the benchmark's token limits):

- the turn is ``conv_mllava_v1`` for one user message, and the processor writes the j-th ``<image>`` as
  ``(image j: <Image><image></Image>)`` (the ``mllava_v1`` template renders both);
- the processor tokenizes the whole text at once with the checkpoint's tokenizer, truncation on without
  a length (``chat_mllava`` passes ``truncation=True, max_length=None``: the tokenizer's
  ``model_max_length``, the end cut), and drops the pictures whose image tokens were cut;
- pictures go through the image processor alone (for CLIP: resize the shorter side, centre-crop);
- the checkpoint is a transformers LLaVA (Mantis's 2024 model class is a copy of transformers'; its
  README's pure-transformers example loads it with ``LlavaForConditionalGeneration``), in bfloat16;
  generation ends at the EOS; the answer is the new tokens decoded without special tokens (the kit
  strips it, as the scorer's normalisation would).

Where the installed transformers wants each image token expanded to the picture's features in the ids,
the kit repeats it after tokenizing, which is the model's own expansion of the unexpanded ids.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Unpack

from PIL import Image
from transformers import BatchFeature

from milebench.infer.adapter import AdapterError, AdapterOptions
from milebench.infer.hf_llava import HfLlavaAdapter
from milebench.infer.input_view import InputView
from milebench.infer.records import ModelInput
from milebench.paths import ModelFolders
from milebench.spec.execution import Decoding, Tokenization
from milebench.spec.model import ModelSpec

ADAPTER = {
    "kind": "hf-mantis",
    "does": "generate",
    "entry": "HfMantisAdapter",
    "tiny": {"family": "mantis", "builder": "milebench.infer.tiny_mantis:build_tiny_mantis"},
}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {
    "mllava_v1": """Mantis's ``conv_mllava_v1`` as ``chat_mllava`` renders one turn
    (github.com/TIGER-AI-Lab/Mantis, ``mantis/models/conversation.py``), with the ``MLlavaProcessor``'s image
    denotation: ``{system}</s>USER: {prompt}</s>ASSISTANT:``, the j-th ``<image>`` written ``(image j:
    <Image><image></Image>)``.""",
}
"""The turn formats this module declares (milebench.spec.templates), each rendered by the function of its
name."""

MLLAVA_V1_SYSTEM = (
    "A chat between a curious human and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the human's questions."
)
MLLAVA_IMAGE_TOKEN = "<image>"
"""The image token ``MLlavaProcessor`` looks for (a literal in its code)."""


def mllava_v1(prompt: str) -> str:
    """The turn with every image token denoted as ``MLlavaProcessor`` does:
    ``(image j: <Image><image></Image>)`` for the j-th image, counted from 1."""
    first, *rest = prompt.split(MLLAVA_IMAGE_TOKEN)
    denoted = first + "".join(
        f"(image {j}: <Image>{MLLAVA_IMAGE_TOKEN}</Image>){piece}" for j, piece in enumerate(rest, start=1)
    )
    return f"{MLLAVA_V1_SYSTEM}</s>USER: {denoted}</s>ASSISTANT:"


log = logging.getLogger(__name__)

NO_LENGTH = int(1e29)
"""Tokenizers without a length of their own report about 1e30 (transformers' stand-in for none)."""


class HfMantisAdapter(HfLlavaAdapter):
    """LLaVA's model and batching with Mantis's turn, image denotation and whole-text tokenization."""

    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset(TEMPLATES),
        "tokenization": frozenset({Tokenization.WHOLE}),
        "decoding": frozenset(Decoding),
    }

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, **options: Unpack[AdapterOptions]
    ) -> None:
        super().__init__(spec, paths, data_root, **options)
        if self.image_token != MLLAVA_IMAGE_TOKEN:
            raise AdapterError(
                f"model spec {spec.name!r}: the checkpoint's image token is {self.image_token!r}; "
                f"MLlavaProcessor denotes {MLLAVA_IMAGE_TOKEN!r}"
            )

    def input_view(self, sample: ModelInput) -> InputView:
        """The view, with the processor's own cut named where the tokenizer has a length."""
        view = super().input_view(sample)
        limit = self.processor.tokenizer.model_max_length
        if limit >= NO_LENGTH:
            return view
        note = (
            f"MLlavaProcessor cuts the ids after {limit} (model_max_length), and the pictures cut with them"
        )
        return replace(view, notes=(*view.notes, note))

    def encode(self, samples: Sequence[ModelInput]) -> BatchFeature:
        return self.assemble([self.row(s) for s in samples])

    def row(self, sample: ModelInput) -> tuple[list[int], list[Image.Image]]:
        """The sample's ids as ``MLlavaProcessor`` tokenizes them (image ids expanded where this
        transformers wants it) and the pictures whose image ids survived its truncation."""
        ids = list(self.processor.tokenizer(self.render(sample), truncation=True).input_ids)
        pictures = self.input_images(sample)[0]
        kept = ids.count(self.image_token_id)
        if kept < len(pictures):
            log.warning(
                "task %s, sample %s: the tokenizer's model_max_length (%s) cut %d of %d image tokens; their "
                "pictures are dropped, as MLlavaProcessor drops them",
                sample.task,
                sample.sample_id,
                self.processor.tokenizer.model_max_length,
                len(pictures) - kept,
                len(pictures),
            )
        expanded = [n for i in ids for n in ([i] * self.image_seq if i == self.image_token_id else [i])]
        return expanded, pictures[:kept]
