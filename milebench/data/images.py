"""Which image files a task's JSON may name, and which the kit will hand to a model.

The data is not trusted: an entry of ``images_path`` or ``combined_1_images`` must name a file inside its
task's folder (``<Task>/images/``, ``<Task>/combined_1_images/``) once symlinks are resolved, so a task
file cannot make a model read, or an API adapter upload, any other file of the machine. An image must
also be one Pillow reads, with no more pixels than the run's ``max_image_pixels`` by its header: the
size is read before any pixel is decoded, so a decompression bomb costs a few bytes of reading.

Pillow's own limit (``PIL.Image.MAX_IMAGE_PIXELS``) is left as it is. The kit's limit may not exceed it
(:data:`milebench.spec.run.MAX_IMAGE_PIXELS`), so every image Pillow would warn about is refused here
first, with the kit's message, and an accepted image never makes Pillow warn later (tiling, adapters).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from PIL import Image

IMAGE_FOLDERS = {"images_path": "images", "combined_1_images": "combined_1_images"}
"""Each ``task_instance`` field that names images -> the task subfolder its entries are under."""


def task_image(task: str, field: str, name: str) -> str:
    """An entry's path relative to the data root, as the official loader joins it."""
    return f"{task}/{IMAGE_FOLDERS[field]}/{name}"


def outside(task_dir: Path, field: str, name: str) -> str | None:
    """Why entry ``name`` of ``task_instance.<field>`` may not be read; None when it names a path inside
    its folder of ``task_dir`` (symlinks resolved; the file may still be missing)."""
    folder = IMAGE_FOLDERS[field]
    entry = f"task_instance.{field} entry {name!r}"
    shown = f"{task_dir.name}/{folder}/"
    if Path(name).is_absolute():
        return f"{entry} is an absolute path; entries name files under {shown}"
    base = task_dir / folder
    try:
        target = (base / name).resolve()
        if target.is_relative_to(base.resolve()):
            return None
    except (OSError, RuntimeError, ValueError) as err:  # a symlink loop, a NUL byte
        return f"{entry} cannot be resolved: {err}"
    return f"{entry} resolves outside {shown} (to {target})"


def image_problem(path: Path, max_pixels: int) -> str | None:
    """Why ``path`` may not be given to a model (missing, unreadable, over ``max_pixels``); None if fine."""
    if not path.is_file():
        return f"image file not found: {path}"
    over = f"image {path} is over the limit of {max_pixels} pixels (max_image_pixels)"
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
