"""Image files that inputs the kit does not trust name: confined to their folder, bounded in pixels.

A name must lead to a file inside its folder once symlinks are resolved, so an input cannot make a model
read, an API adapter upload or a set copy any other file of the machine. An image must also be one Pillow
reads, with no more pixels than a limit by its header: the size is read before any pixel is decoded, so
a decompression bomb costs a few bytes of reading.

Pillow's own limit (``PIL.Image.MAX_IMAGE_PIXELS``) is left as it is. The kit's limits may not exceed it
(:data:`MAX_IMAGE_PIXELS`), so every image Pillow would warn about is refused here first, with the kit's
message, and an accepted image never makes Pillow warn later (tiling, adapters).
"""

from __future__ import annotations

import warnings
from pathlib import Path

MAX_IMAGE_PIXELS = 89_478_485
"""Pillow's own decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``, about 9459 x 9459), above which
it warns on every open: the default and the ceiling of a run's ``max_image_pixels``. It is 1.27 times the
largest picture the official combined layout makes (109 tiles of 800 x 800 on an 11 x 10 grid, 70.4 M
pixels) and far above any photo, frame or screenshot in MileBench."""


def confined(base: Path, name: str, shown: str) -> str | None:
    """Why ``name`` may not be read as a file under ``base`` (shown as ``shown``); None when it names a
    path inside it (symlinks resolved; the file may still be missing)."""
    if Path(name).is_absolute():
        return f"is an absolute path; entries name files under {shown}"
    try:
        target = (base / name).resolve()
        if target.is_relative_to(base.resolve()):
            return None
    except (OSError, RuntimeError, ValueError) as err:  # a symlink loop, a NUL byte
        return f"cannot be resolved: {err}"
    return f"resolves outside {shown} (to {target})"


def image_problem(path: Path, max_pixels: int, limit: str = "max_image_pixels") -> str | None:
    """Why ``path`` may not be given to a model (missing, unreadable, over ``max_pixels``, the setting
    named ``limit``); None if fine."""
    # Imported here, not at the top: every run spec reads this module's limit, few jobs open an image.
    from PIL import Image

    if not path.is_file():
        return f"image file not found: {path}"
    over = f"image {path} is over the limit of {max_pixels} pixels ({limit})"
    with warnings.catch_warnings():
        # Pillow warns above its own limit, which is never below the kit's: such an image is refused
        # just below, so the warning would only repeat the refusal. (Warning filters are process-wide:
        # preprocess checks every image before its tiling threads start.)
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(path) as image:
                width, height = image.size
                if width * height > max_pixels:
                    return f"{over}: {width}x{height} = {width * height} pixels"
                image.verify()
        except Image.DecompressionBombError as err:  # twice Pillow's limit: refused before the size is known
            return f"{over}: {err}"
        except Exception as err:  # damaged or hostile bytes make Pillow's decoders raise any error type
            return f"Pillow cannot open image {path}: {err}"
    return None
