"""LLaVA-NeXT (LLaVA-1.6) models through ``transformers``: llava-hf conversions and the kit's tiny ones.

Prompting is LLaVA's (``hf_llava``: adjacent-image fix, image tokens in place inside one text part,
since the llava-hf templates would put images first). Images are any-res: the processor tiles each one
by its aspect ratio, expands its image token to the tile features and returns ``image_sizes``, which
``generate`` takes with the pixels; so an image costs a size-dependent number of tokens.
"""

from __future__ import annotations

from typing import Any, ClassVar

from milebench.infer.hf_llava import HfLlavaAdapter
from milebench.spec.execution import Decoding, ImagePreprocessing, Tokenization

ADAPTER = {
    "kind": "hf-llava-next",
    "does": "generate",
    "entry": "HfLlavaNextAdapter",
    "execution": "generic",
    "tiny": {"family": "llava-next", "builder": "milebench.infer.tiny_llava_next:build_tiny_llava_next"},
}
"""What this module runs (milebench.spec.adapters)."""


class HfLlavaNextAdapter(HfLlavaAdapter):
    """LLaVA's prompting with LLaVA-NeXT's model class; its any-res pixels are tiled per image, so inputs
    come from the processor whole and batches are generated whole."""

    model_class = "LlavaNextForConditionalGeneration"
    supported: ClassVar[dict[str, frozenset[Any]]] = {
        **HfLlavaAdapter.supported,
        "image_preprocessing": frozenset({ImagePreprocessing.PROCESSOR}),
        "tokenization": frozenset({Tokenization.WHOLE}),
        "decoding": frozenset({Decoding.BATCHED}),
    }
