"""Idefics2-style models through ``transformers``: HuggingFaceM4/idefics2-8b, TIGER-Lab/Mantis-8B-Idefics2
and the kit's tiny one.

The generic path already interleaves correctly here: the Idefics2 chat template renders content parts
in order, and the processor gives every image token its boundary tokens and ``image_seq_len``
perceiver latents (five times that with image splitting: four crops and the whole image), regroups
the flat image list by the image tokens of each prompt and pads the batch with empty images the model
skips. What this adapter adds is a check at load time: an Idefics2 image always costs the same number
of tokens, so a spec whose ``n_tokens_per_image`` is lower would let truncation keep prompts that do
not fit; such a spec is refused.
"""

from __future__ import annotations

from typing import Any

from milebench.infer.adapter import AdapterError
from milebench.infer.hf_image_text_to_text import HfImageTextToTextAdapter

ADAPTER = {
    "kind": "hf-idefics2",
    "does": "generate",
    "entry": "HfIdefics2Adapter",
    "execution": "generic",
    "tiny": {"family": "idefics2", "builder": "milebench.infer.tiny_idefics2:build_tiny_idefics2"},
}
"""What this module runs (milebench.spec.adapters)."""

SPLIT_CROPS = 5
"""Image splitting sends four crops and the whole image."""


def image_tokens(processor: Any) -> int:
    """Image tokens one image costs with this processor (its boundary tokens not counted)."""
    crops = SPLIT_CROPS if processor.image_processor.do_image_splitting else 1
    return int(processor.image_seq_len) * crops


class HfIdefics2Adapter(HfImageTextToTextAdapter):
    """The generic adapter, with the spec's image token budget checked against the checkpoint."""

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> Any:
        processor = super().load_processor(source, kwargs)
        budget = self.spec.n_tokens_per_image
        cost = image_tokens(processor)
        if budget is not None and budget < cost:
            raise AdapterError(
                f"model spec {self.spec.name!r}: n_tokens_per_image {budget} is below the {cost} image "
                f"tokens this checkpoint gives each image ({source})"
            )
        return processor
