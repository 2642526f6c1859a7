"""MMLongBench-Doc (``samples.json`` and its documents as page images) for Logical Summarization.

Published format: ``samples.json``, a list of ``{"doc_id": "<name>.pdf", "doc_type", "question",
"answer", "evidence_pages", ...}``; each distinct ``doc_id`` is a document. PDFs are not decoded here:
render each document's pages first into a folder named by the file's stem beside ``samples.json``
(e.g. ``pdftoppm -png doc.pdf doc/page``), read in file-name order.

MMLongBench-Doc has no summaries: the paper's summary of each document is model-written, so it is
handed in as ``model_output`` (JSONL ``{"id": doc_id, "summary", "pages": [first, last]}``, pages
1-based and inclusive: the part of the document the summary covers). The pages after it (then those
before it) are the unseen consecutive pages its Hard negatives take.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, PositiveInt

from milebench.benchmarks.mmlongembed.sources.common import (
    PublishedSource,
    SourceError,
    StepLine,
    needed,
    read_json,
    record,
    records,
    step_outputs,
)
from milebench.benchmarks.mmlongembed.task_inputs import IMAGE_SUFFIXES, ImageItem, SummaryInput, inside
from milebench.benchmarks.mmlongembed.task_kinds import Task
from milebench.spec.base import Spec

TASK = Task.LOGICAL_SUMMARIZATION


class Sample(Spec, extra="ignore"):
    doc_id: str = Field(min_length=1)


class Summary(StepLine):
    """A line of the summary writer's output."""

    summary: str = Field(min_length=1)
    pages: tuple[PositiveInt, PositiveInt]


def _input(base: Path, doc: str, step: Summary, where: str) -> SummaryInput:
    folder = inside(base, Path(doc).stem, where, "doc_id")
    if not folder.is_dir():
        raise SourceError(f"{where}: doc_id: no folder of page images {folder}")
    pages = sorted(p.name for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    first, last = step.pages
    if not 1 <= first <= last <= len(pages):
        raise SourceError(f"{where}: model_output: pages {list(step.pages)} outside the {len(pages)} pages")
    name = Path(doc).stem
    images = [ImageItem(image=f"{name}/{p}") for p in pages]
    fields = {
        "id": doc,
        "summary": step.summary,
        "segments": images[first - 1 : last],
        "spare_segments": [*images[last:], *images[: first - 1]] or None,
    }
    return record(fields, SummaryInput, where)


def load(path: Path, model_output: Path | None) -> list[tuple[str, SummaryInput]]:
    raw = read_json(path, "MMLongBench-Doc samples")
    if not isinstance(raw, list):
        raise SourceError(f"{path}: a JSON list of samples expected")
    samples = records(
        [(f"{path}: sample {i}", r) for i, r in enumerate(raw)], Sample, lambda r: f"doc_id {r.get('doc_id')}"
    )
    documents: dict[str, str] = {}
    for where, sample in samples:
        documents.setdefault(sample.doc_id, where)
    summaries = step_outputs(model_output, Summary, "summary writing", True, "model_output")
    return [
        (w, _input(path.parent, doc, needed(summaries, doc, model_output, w), w))
        for doc, w in documents.items()
    ]


SOURCES = (PublishedSource("mmlongbench-doc", TASK, load),)
