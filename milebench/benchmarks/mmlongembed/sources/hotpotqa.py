"""HotpotQA (distractor or fullwiki JSON) for Multi-Source Reasoning.

Published format: one JSON list, each question ``{"_id", "question", "answer", "type", "level",
"supporting_facts": [[title, sentence index], ...], "context": [[title, [sentence, ...]], ...]}``.
The document is the context paragraphs in order, each sentence a text segment (a paragraph's first
sentence led by its title); the sentences named by ``supporting_facts`` are the evidence spans (a fact
naming a sentence the context lacks is refused).

The paper's query audit is model-assisted: its output is handed in as ``model_output`` (JSONL
``{"id": _id, "keep": bool}``); without it every question with 2 to 5 facts is kept.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from milebench.benchmarks.mmlongembed.sources.common import (
    PublishedSource,
    SourceError,
    read_json,
    record,
    records,
    step_outputs,
)
from milebench.benchmarks.mmlongembed.sources.mmdocrag import Audit, audited
from milebench.benchmarks.mmlongembed.task_inputs import EvidenceText, ReasoningInput
from milebench.benchmarks.mmlongembed.task_kinds import Task
from milebench.spec.base import Spec

TASK = Task.MULTI_SOURCE_REASONING


class HotpotQuestion(Spec, extra="ignore"):
    id: str = Field(alias="_id", min_length=1)
    question: str = Field(min_length=1)
    supporting_facts: tuple[tuple[str, int], ...] = Field(min_length=1)
    context: tuple[tuple[str, tuple[str, ...]], ...] = Field(min_length=1)


def _input(q: HotpotQuestion, where: str) -> ReasoningInput:
    facts = set(q.supporting_facts)
    known = {(title, i) for title, sentences in q.context for i in range(len(sentences))}
    missing = sorted(facts - known)
    if missing:
        raise SourceError(f"{where}: supporting_facts: {missing[0]} names no sentence of context")
    segments = [
        EvidenceText(text=f"{title}. {s}" if i == 0 else s, evidence=(title, i) in facts)
        for title, sentences in q.context
        for i, s in enumerate(sentences)
        if s.strip()
    ]
    return record({"id": q.id, "query": q.question, "segments": segments}, ReasoningInput, where)


def load(path: Path, model_output: Path | None) -> list[tuple[str, ReasoningInput]]:
    raw = read_json(path, "HotpotQA questions")
    if not isinstance(raw, list):
        raise SourceError(f"{path}: a JSON list of questions expected")
    rows = [(f"{path}: question {i}", r) for i, r in enumerate(raw)]
    questions = records(rows, HotpotQuestion, lambda r: f"_id {r.get('_id')}")
    audit = step_outputs(model_output, Audit, "query audit", False, "model_output")
    return audited([(w, _input(q, w)) for w, q in questions], audit)


SOURCES = (PublishedSource("hotpotqa", TASK, load),)
