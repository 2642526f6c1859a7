"""The kit's combined-image tiler: the official layout, a bundled font, byte-identical output.

Layout (reference section 3, official ``data/combine_images.py``): every image is resized to 800x800 with
LANCZOS (aspect ratio not kept) and converted to RGBA; a label "Image k" (k = global 1-based index) is drawn
in white with a 32 px font on a black box centred at the bottom (the box reaches 12 px past the text on
each side and 22 px above it, and runs past the bottom edge); tiles fill a grid of ``ceil(sqrt(n))``
columns row by row on a black RGB canvas, saved as JPEG with Pillow's defaults. Splitting a sample into N
pictures gives each ``(n - 1) // N + 1`` images.

The official script draws with ``arialuni.ttf`` from the working directory; the kit draws with the DejaVu
Sans 2.35 it ships as package data (``fonts/``, the bytes matplotlib 3.11 ships), so the output depends on
the kit and Pillow only, never on the machine's fonts or another package's release. Label glyphs therefore
differ from the paper's pictures; the geometry does not.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from milebench.io import atomic_write_bytes, canonical_json, sha256_file, sha256_text
from milebench.package_data import package_path

TILE = (800, 800)
FONT_SIZE = 32
"""The official script's label font: ``font_size * 4`` with its default ``--font_size 8``."""
PADDING = 12
LIFT = 10
JPEG_QUALITY = 75
"""Pillow's default, which the official ``save(path)`` uses."""
LAYOUT_VERSION = 1
"""Bump when the drawing changes: it is part of every cache key."""


FONT = package_path("milebench.benchmarks.milebench.preprocess", "fonts", "DejaVuSans.ttf")
"""The label font; its hash is part of every cache key."""


@cache
def font() -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONT), FONT_SIZE)


@cache
def font_sha256() -> str:
    return sha256_file(FONT)


def groups(n_images: int, n_pictures: int) -> list[range]:
    """Image index ranges of each picture: ``(n - 1) // N + 1`` images per picture, as the official script."""
    per_picture = (n_images - 1) // n_pictures + 1
    return [range(start, min(start + per_picture, n_images)) for start in range(0, n_images, per_picture)]


def grid(n: int) -> tuple[int, int]:
    """(columns, rows) for ``n`` tiles."""
    columns = math.ceil(math.sqrt(n))
    return columns, math.ceil(n / columns)


def label_box(label: str) -> tuple[tuple[float, float], tuple[float, float, float, float]]:
    """Text origin and black box of a tile's label, as the official ``add_caption`` places them."""
    left, top, right, bottom = ImageDraw.Draw(Image.new("RGBA", (1, 1))).textbbox((0, 0), label, font=font())
    width, height = right - left, bottom - top
    x, y = (TILE[0] - width) // 2, TILE[1] - height
    return (x, y), (x - PADDING, y - PADDING - LIFT, x + width + PADDING, y + height + PADDING)


def tile(image: Image.Image, label: str) -> Image.Image:
    resized = image.resize(TILE, Image.Resampling.LANCZOS).convert("RGBA")
    draw = ImageDraw.Draw(resized)
    origin, box = label_box(label)
    draw.rectangle(box, fill="black")
    draw.text(origin, label, fill="white", font=font())
    return resized


def picture(paths: Sequence[Path], first_index: int) -> Image.Image:
    """One combined picture of ``paths``, labelled from ``first_index + 1``."""
    columns, rows = grid(len(paths))
    canvas = Image.new("RGB", (columns * TILE[0], rows * TILE[1]))
    for i, path in enumerate(paths):
        with Image.open(path) as image:
            labelled = tile(image, f"Image {first_index + i + 1}")
        canvas.paste(labelled, ((i % columns) * TILE[0], (i // columns) * TILE[1]))
    return canvas


def encode(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


@dataclass(frozen=True)
class PictureJob:
    """One picture to make: its source images (paths and content hashes) and its first label index."""

    paths: tuple[Path, ...]
    sha256: tuple[str, ...]
    first_index: int

    @property
    def key(self) -> str:
        """Content hash of everything the picture's bytes depend on."""
        return sha256_text(
            canonical_json(
                {
                    "layout": LAYOUT_VERSION,
                    "font": font_sha256(),
                    "images": list(self.sha256),
                    "first_index": self.first_index,
                    "tile": list(TILE),
                    "font_size": FONT_SIZE,
                    "quality": JPEG_QUALITY,
                }
            )
        )


def sample_jobs(paths: Sequence[Path], sha256: Sequence[str], n_pictures: int) -> list[PictureJob]:
    """The pictures one sample's images are tiled into."""
    return [
        PictureJob(tuple(paths[i] for i in g), tuple(sha256[i] for i in g), g.start)
        for g in groups(len(paths), n_pictures)
    ]


def make_picture(job: PictureJob, cache_dir: Path) -> Path:
    """The picture's file in ``cache_dir``; made only when no file of that content key exists yet."""
    out = cache_dir / f"{job.key}.jpg"
    if not out.is_file():
        atomic_write_bytes(out, encode(picture(job.paths, job.first_index)))
    return out


def make_pictures(jobs: Sequence[PictureJob], cache_dir: Path, workers: int = 1) -> list[Path]:
    """Every job's picture, in job order; ``workers > 1`` tiles in parallel threads (Pillow's resize,
    drawing and JPEG coding release the GIL)."""
    font()  # load once before threads share it
    if workers <= 1:
        return [make_picture(job, cache_dir) for job in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(make_picture, jobs, [cache_dir] * len(jobs)))
