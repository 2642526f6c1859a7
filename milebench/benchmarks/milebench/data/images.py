"""Which image files a task's JSON may name: an entry of ``images_path`` or ``combined_1_images`` must
name a file inside its task's folder (``<Task>/images/``, ``<Task>/combined_1_images/``), by the kit's
rules for untrusted image names (:mod:`milebench.image_files`)."""

from __future__ import annotations

from pathlib import Path

from milebench.image_files import confined

IMAGE_FOLDERS = {"images_path": "images", "combined_1_images": "combined_1_images"}
"""Each ``task_instance`` field that names images -> the task subfolder its entries are under."""


def task_image(task: str, field: str, name: str) -> str:
    """An entry's path relative to the data root, as the official loader joins it."""
    return f"{task}/{IMAGE_FOLDERS[field]}/{name}"


def outside(task_dir: Path, field: str, name: str) -> str | None:
    """Why entry ``name`` of ``task_instance.<field>`` may not be read; None when it names a path inside
    its folder of ``task_dir`` (symlinks resolved; the file may still be missing)."""
    folder = IMAGE_FOLDERS[field]
    why = confined(task_dir / folder, name, f"{task_dir.name}/{folder}/")
    return None if why is None else f"task_instance.{field} entry {name!r} {why}"
