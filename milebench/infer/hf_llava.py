"""LLaVA-family models through ``transformers`` (hub checkpoints and the kit's tiny checkpoints).

Prompting follows the official LLaVA worker where it matters for answers: ``<ImageHere><ImageHere>``
becomes ``<ImageHere>\\n<ImageHere>\\n`` (its CLEVR-Change fix), every placeholder becomes the
processor's image token in place, the answer is decoded from the new tokens only and stripped.

The llava-hf chat templates put every image part before all text parts, which would move MileBench's
interleaved images to the front of the prompt; so the prompt reaches the template as one text part with
the image tokens already in place, and the template only adds the turn format. A checkpoint without a
template gets the LLaVA-1.5 ``USER: ... ASSISTANT:`` format.
"""

from __future__ import annotations

from milebench.infer.hf_image_text_to_text import HfImageTextToTextAdapter
from milebench.records import IMAGE_PLACEHOLDER, PreparedSample

ADJACENT_IMAGES = IMAGE_PLACEHOLDER * 2
ADJACENT_IMAGES_SPLIT = f"{IMAGE_PLACEHOLDER}\n{IMAGE_PLACEHOLDER}\n"
LLAVA_IMAGE_TOKEN = "<image>"
"""The image token of processors that do not name theirs (transformers before 4.4x)."""


class HfLlavaAdapter(HfImageTextToTextAdapter):
    """The generic adapter with LLaVA's model class, its adjacent-image fix and image tokens in place."""

    model_class = "LlavaForConditionalGeneration"

    def render(self, sample: PreparedSample) -> str:
        """The model's text input: image tokens in place, wrapped in the checkpoint's turn format."""
        prompt = sample.prompt.replace(ADJACENT_IMAGES, ADJACENT_IMAGES_SPLIT)
        text = prompt.replace(IMAGE_PLACEHOLDER, getattr(self.processor, "image_token", LLAVA_IMAGE_TOKEN))
        if not getattr(self.processor, "chat_template", None):
            return f"USER: {text} ASSISTANT:"
        conversation = [{"role": "user", "content": [{"type": "text", "text": text}]}]
        return self.processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
