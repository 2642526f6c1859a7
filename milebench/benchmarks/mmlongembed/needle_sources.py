"""Visual Grounding's needles from the paper's sources: NeedleBench's text needles, MM-NIAH's image
needles. Each source record is one family of look-alikes (the paper's near-duplicates differing only in
the core entity); a family's members are each the needle of their own query.

- NeedleBench (OpenCompass ``needles.jsonl``): one needle a line, ``{"needle", "retrieval_question",
  "language", ...}``. Its look-alike needles are model-written in the paper, so they are handed in as
  the step's output (JSONL ``{"id": <0-based line among the file's needles>, "entity": the needle's
  core entity, "lookalikes": [{"entity", "needle", "question"}, ...]}``); the needles it names, in the
  file's order, are the families.
- MM-NIAH (``retrieval-image-*.jsonl``): one sample a line, ``{"id", "images_list", "context",
  "question", "answer", "meta": {"needles": [image path], "choices_image_path": [image path, ...],
  ...}}``; a sample's image choices (the needle among its look-alikes) are a family, paths relative to
  the file and confined to its folder. A text query per image is model-written in the paper (the sample's
  own question asks for an option, not a description), so it is handed in (JSONL ``{"id": sample id,
  "queries": [one per choice]}``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, StrictInt

from milebench.benchmarks.mmlongembed.needles import Needle
from milebench.benchmarks.mmlongembed.sources.common import (
    SourceError,
    StepLine,
    read_jsonl,
    records,
    step_outputs,
)
from milebench.benchmarks.mmlongembed.task_inputs import inside
from milebench.spec.base import Spec


class BenchNeedle(Spec, extra="ignore"):
    needle: str = Field(min_length=1)
    retrieval_question: str = Field(min_length=1)


class Lookalike(Spec):
    entity: str = Field(min_length=1)
    needle: str = Field(min_length=1)
    question: str = Field(min_length=1)


class Lookalikes(StepLine):
    """A line of the look-alike writer's output."""

    entity: str = Field(min_length=1)
    lookalikes: tuple[Lookalike, ...] = Field(min_length=1)


class NiahMeta(Spec, extra="ignore"):
    choices_image_path: tuple[str, ...] = Field(min_length=2)


class NiahSample(Spec, extra="ignore"):
    id: StrictInt | str
    meta: NiahMeta


class ImageQueries(StepLine):
    """A line of the image describer's output: a query per image choice, in the choices' order."""

    queries: tuple[str, ...] = Field(min_length=2)


def needlebench(path: Path, model_output: Path | None) -> list[Needle]:
    rows = records(read_jsonl(path, "NeedleBench needles"), BenchNeedle, lambda r: "")
    step = step_outputs(model_output, Lookalikes, "look-alike writing", True, "needles.text_lookalikes")
    unknown = sorted(set(step) - {str(i) for i in range(len(rows))})
    if unknown:
        raise SourceError(f"{model_output}: id {unknown[0]!r}: {path} has {len(rows)} needles")
    out: list[Needle] = []
    for i, (_, row) in enumerate(rows):
        if (found := step.get(str(i))) is None:
            continue
        family = f"needlebench-{i}"
        out.append(Needle(family, found.entity, "text", row.retrieval_question, text=row.needle))
        out += [Needle(family, x.entity, "text", x.question, text=x.needle) for x in found.lookalikes]
    return out


def mm_niah(path: Path, model_output: Path | None) -> list[Needle]:
    rows = records(read_jsonl(path, "MM-NIAH samples"), NiahSample, lambda r: f"id {r.get('id')}")
    step = step_outputs(model_output, ImageQueries, "image description", True, "needles.image_queries")
    out: list[Needle] = []
    for where, row in rows:
        if (found := step.get(str(row.id))) is None:
            continue
        choices = row.meta.choices_image_path
        if len(found.queries) != len(choices):
            raise SourceError(
                f"{where}: meta.choices_image_path: {len(choices)} choices but {len(found.queries)}"
                f" queries in {model_output}"
            )
        for k, (image, query) in enumerate(zip(choices, found.queries, strict=True)):
            picture = inside(path.parent, image, where, f"meta.choices_image_path.{k}")
            out.append(Needle(f"mm-niah-{row.id}", str(k), "image", query, image=picture))
    return out
