"""LLaVA-family models through ``transformers`` (hub checkpoints and the kit's tiny checkpoints).

Prompting follows the official LLaVA worker where it matters for answers: ``<ImageHere><ImageHere>``
becomes ``<ImageHere>\\n<ImageHere>\\n`` (its CLEVR-Change fix), every placeholder becomes the
processor's image token, the answer is decoded from the new tokens only and stripped.
"""

from __future__ import annotations

from transformers import LlavaForConditionalGeneration

from milebench.infer.hf_image_text_to_text import HfImageTextToTextAdapter, split_segments
from milebench.records import IMAGE_PLACEHOLDER, PreparedSample

ADJACENT_IMAGES = IMAGE_PLACEHOLDER * 2
ADJACENT_IMAGES_SPLIT = f"{IMAGE_PLACEHOLDER}\n{IMAGE_PLACEHOLDER}\n"


class HfLlavaAdapter(HfImageTextToTextAdapter):
    """The generic adapter with LLaVA's model class, its adjacent-image fix and a plain fallback format."""

    model_class = LlavaForConditionalGeneration

    def render(self, sample: PreparedSample) -> str:
        """The model's text input: image tokens in place, wrapped in the chat format."""
        prompt = sample.prompt.replace(ADJACENT_IMAGES, ADJACENT_IMAGES_SPLIT)
        if self.processor.chat_template:
            conversation = [{"role": "user", "content": split_segments(prompt)}]
            return self.processor.apply_chat_template(
                conversation, add_generation_prompt=True, tokenize=False
            )
        text = prompt.replace(IMAGE_PLACEHOLDER, self.processor.image_token)
        return f"USER: {text} ASSISTANT:"
