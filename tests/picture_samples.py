"""Open-ended WebQA samples over plain pictures of chosen sizes, for the transformers adapter tests."""

from __future__ import annotations

from collections.abc import Sequence

from PIL import Image

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import QuestionType


def write_pictures(paths: RunPaths, sizes: Sequence[tuple[int, int]]) -> None:
    """``WebQA/images/<i>.png`` of each width x height, each in its own colour."""
    folder = paths.data_root / "WebQA/images"
    folder.mkdir(parents=True)
    for i, size in enumerate(sizes):
        Image.new("RGB", size, (60 * i, 200 - 40 * i, 40)).save(folder / f"{i}.png")


def picture_sample(sample_id: int, n_images: int) -> PreparedSample:
    """A prepared sample over the first ``n_images`` pictures, one placeholder per picture."""
    marks = "".join(f"<ImageHere> slide {i} " for i in range(n_images))
    return PreparedSample(
        task="WebQA",
        mode=Mode.MULTI_IMAGE,
        sample_id=sample_id,
        instruction="Answer.",
        context=f"{marks}which is red?",
        images=tuple(f"WebQA/images/{i}.png" for i in range(n_images)),
        image_sha256=tuple(f"{i:064x}" for i in range(n_images)),
        prompt_sha256=f"{sample_id:064x}",
        question_type=QuestionType.OPEN_ENDED,
        choices=None,
        response="x",
        image_quantity_level="Few",
        n_images=n_images,
    )
