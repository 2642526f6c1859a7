"""MMDocRAG (``dev_*.jsonl`` / ``evaluation_*.jsonl``) for Multi-Source Reasoning.

Published format: one question a line, ``{"q_id", "doc_name", "question", "text_quotes": [{"quote_id",
"text", "page_id", "layout_id", ...}], "img_quotes": [{"quote_id", "img_path", "img_description",
"page_id", "layout_id", ...}], "gold_quotes": [quote_id, ...], ...}``. The document is the quotes in
page then layout order (text quotes as text, image quotes as their pictures, ``img_path`` relative to
the JSONL file and confined to its folder); the gold quotes are the evidence spans.

The paper's query audit is model-assisted: its output is handed in as ``model_output`` (JSONL
``{"id": q_id, "keep": bool}``); without it every question with 2 to 5 gold quotes is kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import Field, StrictBool, StrictInt

from milebench.benchmarks.mmlongembed.sources.common import (
    PublishedSource,
    SourceError,
    StepLine,
    read_jsonl,
    record,
    records,
    step_outputs,
)
from milebench.benchmarks.mmlongembed.task_inputs import EvidenceImage, EvidenceText, ReasoningInput, inside
from milebench.benchmarks.mmlongembed.task_kinds import Task
from milebench.spec.base import Spec

TASK = Task.MULTI_SOURCE_REASONING


class Audit(StepLine):
    """A line of the query audit's output: whether the question stays in the benchmark."""

    keep: StrictBool


class TextQuote(Spec, extra="ignore"):
    quote_id: str
    text: str = Field(min_length=1)
    page_id: StrictInt | None = None
    layout_id: StrictInt | None = None


class ImageQuote(Spec, extra="ignore"):
    quote_id: str
    img_path: str = Field(min_length=1)
    page_id: StrictInt | None = None
    layout_id: StrictInt | None = None


class MmDocRagQuestion(Spec, extra="ignore"):
    q_id: str | StrictInt
    question: str = Field(min_length=1)
    text_quotes: tuple[TextQuote, ...] = ()
    img_quotes: tuple[ImageQuote, ...] = ()
    gold_quotes: tuple[str, ...] = Field(min_length=1)


def audited(
    rows: Sequence[tuple[str, ReasoningInput]], audit: Mapping[str, Audit]
) -> list[tuple[str, ReasoningInput]]:
    """The rows the audit keeps (all without an audit); a row the audit does not judge is refused."""
    if not audit:
        return list(rows)
    missing = next((w for w, r in rows if r.id not in audit), None)
    if missing is not None:
        raise SourceError(f"{missing}: model_output: the query audit has no line for this question")
    return [(w, r) for w, r in rows if audit[r.id].keep]


def _input(q: MmDocRagQuestion, base: Path, where: str) -> ReasoningInput:
    for k, x in enumerate(q.img_quotes):
        inside(base, x.img_path, where, f"img_quotes.{k}.img_path")  # named by the source's field
    quotes: list[TextQuote | ImageQuote] = [*q.text_quotes, *q.img_quotes]
    ids = [x.quote_id for x in quotes]
    unknown = [g for g in q.gold_quotes if g not in ids]
    if unknown:
        raise SourceError(f"{where}: gold_quotes: {unknown[0]!r} is none of the question's quotes")
    gold = set(q.gold_quotes)
    ordered = sorted(quotes, key=lambda x: (x.page_id or 0, x.layout_id or 0))
    segments = [
        EvidenceText(text=x.text, evidence=x.quote_id in gold)
        if isinstance(x, TextQuote)
        else EvidenceImage(image=x.img_path, evidence=x.quote_id in gold)
        for x in ordered
    ]
    return record({"id": str(q.q_id), "query": q.question, "segments": segments}, ReasoningInput, where)


def load(path: Path, model_output: Path | None) -> list[tuple[str, ReasoningInput]]:
    questions = records(
        read_jsonl(path, "MMDocRAG questions"), MmDocRagQuestion, lambda r: f"q_id {r.get('q_id')}"
    )
    audit = step_outputs(model_output, Audit, "query audit", False, "model_output")
    return audited([(w, _input(q, path.parent, w)) for w, q in questions], audit)


SOURCES = (PublishedSource("mmdocrag", TASK, load),)
