"""GovReport (``crs/*.json`` and ``gao/*.json``) for Logical Summarization.

Published format: one JSON file per report. CRS: ``{"id", "title", "released_date", "reports":
section, "summary": [paragraph, ...]}``; GAO: ``{"id", "title", "report": [section, ...],
"highlight": [section, ...], ...}``; a section is ``{"section_title", "paragraphs": [str, ...],
"subsections": [section, ...]}``. The input is the folder (or one file): its ``*.json`` files in name
order, each a query. The document is the report's paragraphs in reading order (each section's title
leading its first paragraph), one text segment each; the summary is CRS's ``summary`` or GAO's
``highlight`` paragraphs (without their headings). No step of this source is model-assisted.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from milebench.benchmarks.mmlongembed.sources.common import PublishedSource, SourceError, read_json, record
from milebench.benchmarks.mmlongembed.task_inputs import SummaryInput, TextItem
from milebench.benchmarks.mmlongembed.task_kinds import Task
from milebench.spec.base import Spec

TASK = Task.LOGICAL_SUMMARIZATION


class Section(Spec, extra="ignore"):
    section_title: str = ""
    paragraphs: tuple[str, ...] = ()
    subsections: tuple[Section, ...] = ()


class CrsReport(Spec, extra="ignore"):
    id: str = Field(min_length=1)
    reports: Section
    summary: tuple[str, ...] = Field(min_length=1)


class GaoReport(Spec, extra="ignore"):
    id: str = Field(min_length=1)
    report: tuple[Section, ...] = Field(min_length=1)
    highlight: tuple[Section, ...] = Field(min_length=1)


def paragraphs(sections: tuple[Section, ...], titled: bool = True) -> list[str]:
    """Every paragraph in reading order, a section's title leading its first one where ``titled``."""
    out: list[str] = []
    for section in sections:
        texts = [p.strip() for p in section.paragraphs if p.strip()]
        if titled and texts and section.section_title.strip():
            texts[0] = f"{section.section_title.strip()}. {texts[0]}"
        out += texts + paragraphs(section.subsections, titled)
    return out


def _input(path: Path) -> tuple[str, SummaryInput]:
    raw = read_json(path, "GovReport report")
    where = f"{path}: report {raw.get('id')}" if isinstance(raw, dict) else str(path)
    if not isinstance(raw, dict) or ("reports" in raw) == ("report" in raw):
        raise SourceError(f"{where}: reports (CRS) or report (GAO) expected, exactly one")
    if "reports" in raw:
        crs = record(raw, CrsReport, where)
        body, summary, rid = paragraphs((crs.reports,)), [s.strip() for s in crs.summary], crs.id
    else:
        gao = record(raw, GaoReport, where)
        body, summary, rid = paragraphs(gao.report), paragraphs(gao.highlight, titled=False), gao.id
    text = " ".join(s for s in summary if s)
    fields = {"id": rid, "summary": text, "segments": [TextItem(text=p) for p in body]}
    return where, record(fields, SummaryInput, where)


def load(path: Path, model_output: Path | None) -> list[tuple[str, SummaryInput]]:
    del model_output  # nothing of GovReport is model-made
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise SourceError(f"{path}: no *.json reports")
    return [_input(f) for f in files]


SOURCES = (PublishedSource("govreport", TASK, load),)
