"""Prepare a whole task for one input regime: pictures, prompts, skips and the manifest that counts them.

Combined pictures come from the data's ``combined_1_images`` (what the paper used) when the run asks for
one upstream picture per sample and the sample has one; otherwise the kit's tiler makes them, once per
content (cached under the run's ``tiles/``) and in parallel across samples.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from milebench.benchmarks.milebench.data.schema import Sample, TaskFile
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess import combine
from milebench.benchmarks.milebench.preprocess.prompt import (
    PreprocessError,
    Where,
    build_sample,
    hash_images,
    image_files,
)
from milebench.benchmarks.milebench.preprocess.regime import Regime
from milebench.benchmarks.milebench.preprocess.truncate import Budget
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.run import CombinedSource, Mode
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.image_files import MAX_IMAGE_PIXELS
from milebench.preprocess.tokenizer import load_tokenizer
from milebench.spec.base import Spec
from milebench.spec.model import ImageInput

log = logging.getLogger(__name__)


class SkippedSample(Spec):
    sample_id: int
    error: str


class PrepareManifest(Spec):
    """Written beside the prepared samples: where they came from, for whom, and what was left out."""

    task: str
    mode: Mode
    regime_id: str
    regime: Regime
    models: tuple[str, ...] = Field(description="The run's models that read this file.")
    source: str
    source_sha256: str
    n_samples: int = Field(description="Samples in the source file.")
    n_prepared: int
    skipped: tuple[SkippedSample, ...] = Field(description="Bad samples left out (skip_bad_samples: true).")
    n_truncated: int = Field(description="Prepared samples the context budget cut.")
    images_kept: int
    images_dropped_budget: int
    images_unpaired: int
    kit_pictures: int = Field(description="Combined pictures the kit's tiler provided.")


@dataclass(frozen=True)
class PreparedTask:
    samples: list[PreparedSample]
    skipped: list[SkippedSample]
    kit_pictures: int


def load_budget(regime: Regime, paths: RunPaths) -> Budget | None:
    """The regime's token budget with its tokenizer loaded; None for the unlimited regime."""
    source = regime.tokenizer
    if not regime.budgeted or source is None or regime.max_context_len is None or regime.truncation is None:
        return None
    location = paths.model_dir(source.name) if source.kind == "model-dir" else source.name
    return Budget(
        max_context_len=regime.max_context_len,
        n_tokens_per_image=regime.n_tokens_per_image or 0,
        tokenizer=load_tokenizer(location, source.revision, source.trust_remote_code),
        mode=regime.truncation,
    )


def uses_kit_tiles(regime: Regime, sample: Sample) -> bool:
    return (
        regime.combined_source is CombinedSource.KIT
        or (regime.combined_pictures or 1) > 1
        or not sample.task_instance.combined_1_images
    )


def kit_pictures(
    task: str,
    samples: Sequence[Sample],
    source: Path,
    paths: RunPaths,
    tiles: Path,
    n_pictures: int,
    workers: int,
    max_pixels: int,
) -> dict[int, list[str] | PreprocessError]:
    """Sample id -> picture paths relative to the data root (the pictures made in ``tiles``), or the error
    that stops that sample.

    Every image is checked before any is decoded, so the tiler reads only images within the pixel limit.
    """
    result: dict[int, list[str] | PreprocessError] = {}
    jobs: dict[int, list[combine.PictureJob]] = {}
    for sample in samples:
        where = Where(task, sample.sample_id, source)
        try:
            rel = image_files(paths.data_root, sample, task, where)
            digests = hash_images(paths.data_root, rel, where, max_pixels)
        except PreprocessError as err:
            result[sample.sample_id] = err
            continue
        jobs[sample.sample_id] = combine.sample_jobs([paths.data_root / r for r in rel], digests, n_pictures)
    flat = [job for sample_jobs in jobs.values() for job in sample_jobs]
    made = iter(combine.make_pictures(flat, tiles, workers))
    for sample_id, sample_jobs in jobs.items():
        result[sample_id] = [os.path.relpath(next(made), paths.data_root) for _ in sample_jobs]
    return result


def prepare_task(
    task: TaskSpec,
    task_file: TaskFile,
    source: Path,
    mode: Mode,
    regime: Regime,
    budget: Budget | None,
    paths: RunPaths,
    skip_bad: bool,
    workers: int = 1,
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> PreparedTask:
    """Every sample of ``task_file`` in file order; a bad sample raises, or is skipped when allowed.

    ``max_pixels`` is the run's image size limit: a larger image makes its sample bad.
    """
    combined = regime.image_input is ImageInput.COMBINED
    tiled = [s for s in task_file.data if combined and uses_kit_tiles(regime, s)]
    n_pictures = regime.combined_pictures or 1
    tiles = paths.tiles(task.name, mode, regime.id)
    pictures = kit_pictures(task.name, tiled, source, paths, tiles, n_pictures, workers, max_pixels)
    samples: list[PreparedSample] = []
    skipped: list[SkippedSample] = []
    for sample in task_file.data:
        own = pictures.get(sample.sample_id)
        try:
            if isinstance(own, PreprocessError):
                raise own
            samples.append(
                build_sample(
                    task,
                    task_file.meta_data,
                    sample,
                    mode,
                    paths.data_root,
                    source,
                    budget,
                    combined,
                    own,
                    max_pixels,
                )
            )
        except PreprocessError as err:
            if not skip_bad:
                raise
            log.warning("skipped: %s", err)
            skipped.append(SkippedSample(sample_id=sample.sample_id, error=str(err)))
    return PreparedTask(samples, skipped, sum(len(p) for p in pictures.values() if isinstance(p, list)))


def manifest(
    prepared: PreparedTask,
    task: TaskSpec,
    mode: Mode,
    regime: Regime,
    models: tuple[str, ...],
    source: Path,
    source_sha256: str,
    n_samples: int,
) -> PrepareManifest:
    records = [s.truncation for s in prepared.samples if s.truncation is not None]
    return PrepareManifest(
        task=task.name,
        mode=mode,
        regime_id=regime.id,
        regime=regime,
        models=models,
        source=str(source),
        source_sha256=source_sha256,
        n_samples=n_samples,
        n_prepared=len(prepared.samples),
        skipped=tuple(prepared.skipped),
        n_truncated=sum(r.truncated for r in records),
        images_kept=sum(r.images_kept for r in records),
        images_dropped_budget=sum(r.images_dropped_budget for r in records),
        images_unpaired=sum(r.images_unpaired for r in records),
        kit_pictures=prepared.kit_pictures,
    )
