"""Generated images: image needles (one synthetic object per colour) and abstract haystack pictures.

Drawn with Pillow from a seed, saved as PNG under ``images/<sha256>.png``: the same seed gives the same
bytes, and an image used by many candidates is stored once.
"""

from __future__ import annotations

import hashlib
import io
import math
import random
from pathlib import Path

from PIL import Image, ImageDraw, UnidentifiedImageError

from milebench.benchmarks.mmlongembed.lengths import image_tokens
from milebench.benchmarks.mmlongembed.needles import COLOURS
from milebench.benchmarks.mmlongembed.records import IMAGES, ImageSegment
from milebench.image_files import MAX_IMAGE_PIXELS, image_problem
from milebench.io import atomic_write_bytes
from milebench.record_files import RecordError

NEEDLE_SIZE = 256
HAYSTACK_SIZES = ((256, 256), (320, 224), (224, 288), (288, 192))
BACKGROUND = (236, 236, 230)


def image_segment(data: bytes, suffix: str, size: tuple[int, int]) -> ImageSegment:
    """Image bytes as a segment, named ``images/<sha256><suffix>`` by their content."""
    digest = hashlib.sha256(data).hexdigest()
    width, height = size
    return ImageSegment(
        kind="image",
        image=f"{IMAGES}/{digest}{suffix}",
        sha256=digest,
        width=width,
        height=height,
        tokens=image_tokens(width, height),
    )


def write_image(segment: ImageSegment, data: bytes, folder: Path) -> None:
    """The segment's bytes at its name under ``folder`` (once: the name is the content)."""
    if not (target := folder / segment.image).exists():
        atomic_write_bytes(target, data)


def store_image(data: bytes, suffix: str, size: tuple[int, int], folder: Path) -> ImageSegment:
    """Write image bytes under ``folder/images/`` by content hash (once) and describe them as a segment."""
    segment = image_segment(data, suffix, size)
    write_image(segment, data, folder)
    return segment


def save_png(image: Image.Image, folder: Path) -> ImageSegment:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return store_image(buffer.getvalue(), ".png", image.size, folder)


def _polygon(shape: str, cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    sides, turn = {"triangle": (3, -90), "square": (4, 45), "hexagon": (6, 0), "diamond": (4, 0)}[shape]
    return [
        (
            cx + r * math.cos(math.radians(turn + 360 * k / sides)),
            cy + r * math.sin(math.radians(turn + 360 * k / sides)),
        )
        for k in range(sides)
    ]


def needle_image(shape: str, colour: str) -> Image.Image:
    """The object of an image family in one colour; members differ in nothing else."""
    image = Image.new("RGB", (NEEDLE_SIZE, NEEDLE_SIZE), BACKGROUND)
    draw = ImageDraw.Draw(image)
    c, r = NEEDLE_SIZE / 2, NEEDLE_SIZE * 0.32
    fill, outline = COLOURS[colour], (40, 40, 40)
    if shape == "circle":
        draw.ellipse((c - r, c - r, c + r, c + r), fill=fill, outline=outline, width=3)
    else:
        draw.polygon(_polygon(shape, c, c, r), fill=fill, outline=outline, width=3)
    return image


def haystack_image(rng: random.Random) -> Image.Image:
    """An abstract picture: a two-tone gradient with soft muted rectangles and ellipses."""
    width, height = rng.choice(HAYSTACK_SIZES)
    top = tuple(rng.randrange(60, 200) for _ in range(3))
    bottom = tuple(rng.randrange(60, 200) for _ in range(3))
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for y in range(height):
        t = y / max(1, height - 1)
        draw.line(
            (0, y, width, y), fill=tuple(round(a + (b - a) * t) for a, b in zip(top, bottom, strict=True))
        )
    for _ in range(rng.randrange(3, 8)):
        x0, y0 = rng.randrange(width), rng.randrange(height)
        x1, y1 = x0 + rng.randrange(20, width // 2), y0 + rng.randrange(20, height // 2)
        colour = tuple(rng.randrange(80, 180) for _ in range(3))
        (draw.rectangle if rng.random() < 0.5 else draw.ellipse)((x0, y0, x1, y1), fill=colour)
    return image


def read_picture(path: Path, where: str) -> tuple[ImageSegment, bytes]:
    """A user's picture as a segment and its bytes; one that cannot be read, or is over Pillow's
    decompression-bomb limit by its header, is named with ``where``."""
    problem = image_problem(path, MAX_IMAGE_PIXELS, "Pillow's decompression-bomb limit")
    if problem is not None:
        raise RecordError(f"{where}: {problem}")
    try:
        with Image.open(path) as image:
            size = image.size
        data = path.read_bytes()
    except (OSError, UnidentifiedImageError) as err:
        raise RecordError(f"{where}: image {path} cannot be read: {err}") from None
    return image_segment(data, path.suffix.lower() or ".img", size), data


def copy_image(path: Path, folder: Path, where: str) -> ImageSegment:
    """A user's picture stored under its content name (``read_picture``)."""
    segment, data = read_picture(path, where)
    write_image(segment, data, folder)
    return segment
