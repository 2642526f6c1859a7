"""A sample's images at inference: each must still be the file preprocessing hashed, and must decode.

Either problem fails that sample only, with a detail naming the sample and the file; the rest of its
batch is answered. A changed image must never be answered under the cache key of the old one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from PIL import Image

from milebench.infer.adapter import ImageError
from milebench.infer.records import ModelInput
from milebench.io import sha256_file

log = logging.getLogger(__name__)

UNREADABLE = (OSError, SyntaxError, ValueError, Image.DecompressionBombError)
"""What Pillow raises for a file it cannot open or decode (truncated, not an image, too large)."""


@contextmanager
def reading_image(sample: ModelInput, image: str) -> Iterator[None]:
    """Turn a failure to read or decode ``image`` into an ``ImageError`` naming the sample and the file."""
    try:
        yield
    except UNREADABLE as err:
        raise ImageError(sample, image, f"cannot be read: {type(err).__name__}: {err}") from err


def changed_images(samples: Sequence[ModelInput], data_root: Path) -> dict[int, str]:
    """Sample id -> why its images are not the ones preprocessing hashed (changed, missing, unreadable).

    Each file is hashed once per job, however many samples share it: one extra read of the samples'
    images before the first batch (sha256 ran at 0.7 GB/s on a shared CPU box; the adapter's own read
    then mostly hits the page cache).
    """
    found: dict[str, str | OSError] = {}
    problems: dict[int, str] = {}
    start, size = time.perf_counter(), 0
    for sample in samples:
        for image, expected in zip(sample.images, sample.image_sha256, strict=True):
            if image not in found:
                path = data_root / image
                try:
                    found[image] = sha256_file(path)
                    size += path.stat().st_size
                except OSError as err:
                    found[image] = err
            digest = found[image]
            if isinstance(digest, OSError):
                problem = f"cannot be read: {digest}"
            elif digest != expected:
                problem = (
                    f"changed since preprocessing (expected sha256 {expected}, found {digest}); "
                    "prepare the task again"
                )
            else:
                continue
            problems[sample.sample_id] = ImageError.detail(sample, image, problem)
            break
    if found:
        log.info(
            "checked %d image files (%.1f MB) against their prepared hashes in %.2f s",
            len(found),
            size / 1e6,
            time.perf_counter() - start,
        )
    return problems
