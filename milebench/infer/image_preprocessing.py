"""Pictures as the model's image processor receives them: as they are, or padded to a square.

``pad_to_square`` follows LLaVA's ``process_images`` with ``image_aspect_ratio: pad``: the picture is
centred on a square of its longer side filled with the processor's mean colour, ``int(x * 255)`` per
channel (CLIP's mean gives (122, 116, 104)); a square picture is left as it is. The processor then
resizes and centre-crops, which on a square is a plain resize.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from milebench.spec.execution import ImagePreprocessing


def mean_colour(image_processor: Any) -> tuple[int, ...]:
    """The padding colour: the processor's per-channel mean scaled to 0..255 and cut to an integer."""
    return tuple(int(x * 255) for x in image_processor.image_mean)


def expand_to_square(image: Image.Image, colour: tuple[int, ...]) -> Image.Image:
    """``image`` centred on a square of its longer side; the offset of the shorter side rounds down."""
    width, height = image.size
    if width == height:
        return image
    side = max(width, height)
    square = Image.new(image.mode, (side, side), colour)
    square.paste(image, ((side - width) // 2, (side - height) // 2))
    return square


@dataclass(frozen=True)
class ImageStep:
    """What preprocessing did to one picture, for ``render-input``."""

    original: tuple[int, int]
    padding: tuple[int, ...] | None
    padded: tuple[int, int]


def preprocess(
    images: Sequence[Image.Image], how: ImagePreprocessing, image_processor: Any
) -> tuple[list[Image.Image], list[ImageStep]]:
    """The pictures handed to the image processor, and per picture what was done."""
    if how is ImagePreprocessing.PROCESSOR:
        return list(images), [ImageStep(img.size, None, img.size) for img in images]
    colour = mean_colour(image_processor)
    padded = [expand_to_square(img, colour) for img in images]
    steps = [
        ImageStep(img.size, colour if img.size != out.size else None, out.size)
        for img, out in zip(images, padded, strict=True)
    ]
    return padded, steps
