"""Build model-neutral prompts from upstream samples, as the official ``MileBenchDataset`` does.

Steps (reference section 3): pick the instruction, append the choice block to the context, replace the
``{image#i}`` / ``{table#i}`` references, then fit the context to the model's budget and pair the images
with the placeholders (:func:`~milebench.benchmarks.milebench.preprocess.truncate.fit_context`; without a
budget the pairing keeps the last ``min(n_images, n_placeholders + 1)`` images, and when there are more
images than placeholders one extra placeholder is put at the very start of the context).

Combined-image mode: the context references become the text ``<Image k> ``, the images are the sample's
pictures (upstream ``combined_1_images`` or the kit's tiles), cost no tokens, and the official text is
``"<ImageHere>\\n" + instruction + "\\n" + context`` (one placeholder per picture). That leading line is
stored as part of ``PreparedSample.instruction`` so that ``PreparedSample.prompt`` is exactly the official
string.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.milebench.data.images import IMAGE_FOLDERS, outside, task_image
from milebench.benchmarks.milebench.data.schema import MetaData, Sample
from milebench.benchmarks.milebench.preprocess.truncate import Budget, fit_context
from milebench.benchmarks.milebench.records import PreparedSample, option_label
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.errors import KitError
from milebench.image_files import MAX_IMAGE_PIXELS, image_problem
from milebench.infer.records import IMAGE_PLACEHOLDER
from milebench.io import sha256_file, sha256_text

CHOICE_HEADER = "\nChoice list: \n"
ANSWER_CUE = "\nYour answer is: "
REFERENCE = re.compile(r"\{(image|table)#(\d+)\}")


class PreprocessError(KitError, ValueError):
    """Upstream data that cannot be turned into a prompt; the message names task, sample and file."""


@dataclass(frozen=True)
class Where:
    """Identifies the sample being built, for error messages."""

    task: str
    sample_id: int
    file: Path

    def error(self, message: str) -> PreprocessError:
        return PreprocessError(f"{self.file}: task {self.task}, sample {self.sample_id}: {message}")


def choice_block(choices: Sequence[str], labelled: bool) -> str:
    """The text appended to the context of a multiple-choice sample."""
    lines = [f"{option_label(i)}. {c}" if labelled else c for i, c in enumerate(choices)]
    return CHOICE_HEADER + "\n".join(lines) + ANSWER_CUE


def replace_references(context: str, n_images: int, combined: bool) -> str:
    """Replace ``{image#i}`` and ``{table#i}`` for i = 1..n_images, as the official loop does."""
    for i in range(1, n_images + 1):
        marker = f"<Image {i}> " if combined else IMAGE_PLACEHOLDER
        context = context.replace(f"{{image#{i}}}", marker).replace(f"{{table#{i}}}", marker)
    return context


def check_references(context: str, n_images: int, where: Where) -> None:
    """Reject a reference the official code would leave verbatim in the prompt (index outside 1..n)."""
    for match in REFERENCE.finditer(context):
        index = int(match.group(2))
        if not 1 <= index <= n_images:
            raise where.error(f"context refers to {match.group(0)} but the sample has {n_images} image(s)")


def task_files(data_root: Path, sample: Sample, task: str, field: str, where: Where) -> list[str]:
    """Entries of ``task_instance.<field>`` relative to the data root; refused unless inside their folder."""
    names = getattr(sample.task_instance, field)
    for name in names:
        refusal = outside(data_root / task, field, name)
        if refusal is not None:
            raise where.error(refusal)
    return [task_image(task, field, name) for name in names]


def image_files(data_root: Path, sample: Sample, task: str, where: Where) -> list[str]:
    """The sample's image paths relative to the data root, as the official loader joins them."""
    return task_files(data_root, sample, task, "images_path", where)


def upstream_pictures(data_root: Path, sample: Sample, task: str, where: Where) -> list[str]:
    """The data's pre-made combined picture (what the paper used); the official loader needs exactly one."""
    n_files = len(sample.task_instance.combined_1_images)
    if n_files != 1:
        folder = IMAGE_FOLDERS["combined_1_images"]
        raise where.error(f"combined-image mode needs exactly one {folder} entry, got {n_files}")
    return task_files(data_root, sample, task, "combined_1_images", where)


def hash_images(data_root: Path, images: Sequence[str], where: Where, max_pixels: int) -> tuple[str, ...]:
    """Content hashes of images a model will read; each is checked first (a clear error now beats a
    crash, or a decompression bomb, in the model adapter)."""
    digests = []
    for rel in images:
        path = data_root / rel
        problem = image_problem(path, max_pixels)
        if problem is not None:
            raise where.error(problem)
        digests.append(sha256_file(path))
    return tuple(digests)


def instruction_of(meta: MetaData, sample: Sample, where: Where) -> str:
    if not 0 <= sample.task_instruction_id < len(meta.task_instruction):
        raise where.error(
            f"task_instruction_id {sample.task_instruction_id} is out of range "
            f"(meta_data.task_instruction has {len(meta.task_instruction)} entries)"
        )
    return meta.task_instruction[sample.task_instruction_id]


def build_sample(
    task: TaskSpec,
    meta: MetaData,
    sample: Sample,
    mode: Mode,
    data_root: Path,
    source: Path,
    budget: Budget | None = None,
    combined: bool | None = None,
    pictures: Sequence[str] | None = None,
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> PreparedSample:
    """One PreparedSample; ``source`` is the task JSON the sample came from (named in errors).

    ``budget`` is the model's context (None: unlimited); ``combined`` defaults to the combined-image mode;
    ``pictures`` are the combined pictures relative to the data root (default: the upstream ones);
    ``max_pixels`` is the run's image size limit.
    """
    where = Where(task.name, sample.sample_id, source)
    instance = sample.task_instance
    instruction = instruction_of(meta, sample, where)
    if meta.question_type is not task.question_type:
        raise where.error(
            f"question_type {meta.question_type} differs from the task spec ({task.question_type})"
        )
    context = instance.context
    if instance.choice_list is not None:
        context += choice_block(instance.choice_list, task.labelled_choices)
    n_images = len(instance.images_path)
    check_references(context, n_images, where)
    combined = mode is Mode.COMBINED_IMAGE if combined is None else combined
    context = replace_references(context, n_images, combined)
    images = image_files(data_root, sample, task.name, where)  # checked even where pictures replace them
    if combined:
        images = (
            list(pictures) if pictures is not None else upstream_pictures(data_root, sample, task.name, where)
        )
    fitted = fit_context(instruction, context, images, budget, pair_images=not combined)
    if combined:
        instruction = f"{IMAGE_PLACEHOLDER * len(images)}\n{instruction}"
    prepared = PreparedSample(
        task=task.name,
        mode=mode,
        sample_id=sample.sample_id,
        instruction=instruction,
        context=fitted.context,
        images=fitted.images,
        image_sha256=hash_images(data_root, fitted.images, where, max_pixels),
        prompt_sha256="",
        question_type=meta.question_type,
        choices=tuple(instance.choice_list) if instance.choice_list is not None else None,
        labelled_choices=task.labelled_choices,
        response=sample.response,
        image_quantity_level=sample.image_quantity_level,
        n_images=n_images,
        truncation=fitted.record,
    )
    return prepared.model_copy(update={"prompt_sha256": sha256_text(prepared.prompt)})
