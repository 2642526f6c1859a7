"""Input formats of the real tasks: one JSONL file per dataset, one query a line, paths relative to it.

The benchmark's data is not public, so the kit reads what a user has in these documented formats:

Multi-Source Reasoning (HotpotQA, MMDocRAG)::

    {"id": "q1", "query": "...", "segments": [{"text": "...", "evidence": true}, {"image": "p.png"}, ...]}

  the query's document as ordered text and image segments; 2 to 5 of them are evidence spans.

Logical Summarization (GovReport, MMLongBench page images)::

    {"id": "d1", "summary": "...", "segments": [{"text": "..."}, ...]}
    {"id": "d2", "summary": "...", "pages": "doc2/", "spare_pages": "doc2-unseen/"}

  a text (or interleaved) document, or a folder of page images read in file-name order; ``spare_pages``
  are unseen consecutive pages of the same document, used for its Hard negatives (or
  ``"spare_segments": [{"image": ...}, ...]``, named one by one).

Temporal Summarization (YoukuDenseCaption, ActivityNet Captions)::

    {"id": "v1", "query": "First ... Then ... Finally ...", "frames": "v1/", "fps": 30,
     "events": [[0, 4.5], [4.5, 9]]}

  a folder of the video's frames in file-name order at ``fps`` frames a second (sampled here to 1 fps;
  video files are not decoded: extract frames first, e.g. ``ffmpeg -i v.mp4 -vf fps=1 v/%05d.png`` with
  ``fps: 1``), and its captioned events as [start, end] seconds; the events' start times are the event
  boundaries.

Published formats of the paper's sources are read into these records by ``sources``. Every error
names the file, the line and the query. Pictures and folders are named relative to the
input file and must stay inside its folder (symlinks resolved), as MileBench's images must stay in
their task's folder, and a picture over Pillow's decompression-bomb limit is refused by its header.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import Field, PositiveFloat, ValidationError, model_validator

from milebench.benchmarks.mmlongembed.images import read_picture, write_image
from milebench.benchmarks.mmlongembed.lengths import count_texts
from milebench.benchmarks.mmlongembed.records import ImageSegment, TextSegment
from milebench.benchmarks.mmlongembed.task_kinds import Task
from milebench.image_files import confined
from milebench.io import UnreadableText, read_utf8
from milebench.preprocess.tokenizer import HFTokenizer
from milebench.record_files import RecordError
from milebench.spec.base import Spec, describe_errors

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
MIN_EVIDENCE, MAX_EVIDENCE = 2, 5

Segment = TextSegment | ImageSegment


class TextItem(Spec):
    text: str = Field(min_length=1)


class ImageItem(Spec):
    image: str = Field(description="Path relative to the JSONL file.")


class EvidenceText(TextItem):
    evidence: bool = False


class EvidenceImage(ImageItem):
    evidence: bool = False


class InputRecord(Spec):
    """A line of a task's input: one query, by its id."""

    id: str = Field(min_length=1)


class ReasoningInput(InputRecord):
    query: str = Field(min_length=1)
    segments: tuple[EvidenceText | EvidenceImage, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _evidence(self) -> ReasoningInput:
        n = sum(s.evidence for s in self.segments)
        if not MIN_EVIDENCE <= n <= MAX_EVIDENCE:
            raise ValueError(f"{n} evidence segments; {MIN_EVIDENCE} to {MAX_EVIDENCE} expected")
        return self


class SummaryInput(InputRecord):
    summary: str = Field(min_length=1)
    segments: tuple[TextItem | ImageItem, ...] | None = None
    pages: str | None = Field(default=None, description="A folder of page images, in file-name order.")
    spare_pages: str | None = None
    spare_segments: tuple[ImageItem, ...] | None = Field(
        default=None, description="Unseen pages named one by one (instead of a spare_pages folder)."
    )

    @model_validator(mode="after")
    def _one_document(self) -> SummaryInput:
        if (self.segments is None) == (self.pages is None):
            raise ValueError("exactly one of segments and pages expected")
        if self.spare_pages is not None and self.spare_segments is not None:
            raise ValueError("at most one of spare_pages and spare_segments expected")
        return self


class VideoInput(InputRecord):
    query: str = Field(min_length=1)
    frames: str = Field(description="A folder of the video's frames, in file-name order.")
    fps: PositiveFloat = Field(default=1.0, description="Frames a second in the folder.")
    events: tuple[tuple[float, float], ...] = Field(min_length=2)

    @model_validator(mode="after")
    def _ordered(self) -> VideoInput:
        if any(not 0 <= start < end for start, end in self.events):
            raise ValueError("events: each [start, end] needs 0 <= start < end")
        return self


INPUTS: dict[Task, type[ReasoningInput | SummaryInput | VideoInput]] = {
    Task.MULTI_SOURCE_REASONING: ReasoningInput,
    Task.LOGICAL_SUMMARIZATION: SummaryInput,
    Task.TEMPORAL_SUMMARIZATION: VideoInput,
}
R = TypeVar("R", bound=InputRecord)


@dataclass(frozen=True)
class Source:
    """One query with its document as counted segments; ``evidence``: indices of evidence segments,
    ``events``: indices where a video's events start (after the first), ``spare``: unseen pages."""

    id: str
    query: str
    segments: tuple[Segment, ...]
    where: str
    evidence: tuple[int, ...] = ()
    events: tuple[int, ...] = ()
    spare: tuple[ImageSegment, ...] = ()

    @property
    def length(self) -> int:
        return sum(s.tokens for s in self.segments)


def read_inputs(path: Path, model: type[R]) -> list[tuple[str, R]]:
    """Each line's record, with where it is (``file: line N (query X)``) for later errors."""
    try:
        lines = read_utf8(path).splitlines()
    except UnreadableText as err:
        raise RecordError(str(err)) from None
    except OSError as err:
        raise RecordError(f"{path}: task input cannot be read: {err}") from None
    rows: list[tuple[str, R]] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except ValueError as err:
            raise RecordError(f"{path}: line {number}: not JSON: {err}") from None
        except RecursionError:
            raise RecordError(f"{path}: line {number}: lists or objects nested too deep to read") from None
        name = raw.get("id") if isinstance(raw, dict) else None
        where = f"{path}: line {number}" + (f" (query {name})" if isinstance(name, str) else "")
        try:
            row = model.model_validate(raw)
        except ValidationError as err:
            raise RecordError(f"{where}: {describe_errors(err)}") from None
        if row.id in seen:
            raise RecordError(f"{where}: query id {row.id!r} repeats an earlier line")
        seen.add(row.id)
        rows.append((where, row))
    if not rows:
        raise RecordError(f"{path}: no queries")
    return rows


class Reader:
    """Counts text with the run's tokenizer and names images by content hash; ``write_images`` then
    copies them into the set folder, once every input has been read and checked."""

    def __init__(self, tokenizer: HFTokenizer, folder: Path) -> None:
        self.tokenizer, self.folder = tokenizer, folder
        self.pending: dict[str, tuple[ImageSegment, Path]] = {}

    def write_images(self) -> None:
        """Copy every image read into the set folder; one changed since it was read is refused."""
        for segment, path in self.pending.values():
            try:
                data = path.read_bytes()
            except OSError as err:
                raise RecordError(f"{path}: gone while the set was built: {err}") from None
            if hashlib.sha256(data).hexdigest() != segment.sha256:
                raise RecordError(f"{path}: changed while the set was built; build it again")
            write_image(segment, data, self.folder)
        self.pending.clear()

    def texts(self, texts: Sequence[str]) -> list[TextSegment]:
        return [
            TextSegment(kind="text", text=t, tokens=n)
            for t, n in zip(texts, count_texts(self.tokenizer, texts), strict=True)
        ]

    def image(self, path: Path, where: str) -> ImageSegment:
        segment, _ = read_picture(path, where)
        self.pending.setdefault(segment.image, (segment, path))
        return segment

    def folder_images(self, base: Path, name: str, where: str, field: str) -> list[Path]:
        """The pictures of folder ``name`` (under ``base``), each still inside ``base``."""
        folder = inside(base, name, where, field)
        if not folder.is_dir():
            raise RecordError(f"{where}: {field}: {folder} is not a folder")
        found = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not found:
            raise RecordError(f"{where}: {field}: {folder} holds no images ({', '.join(IMAGE_SUFFIXES)})")
        return [inside(base, str(p.relative_to(base)), where, field) for p in found]

    def items(
        self, items: Sequence[TextItem | ImageItem], base: Path, where: str
    ) -> tuple[list[Segment], list[int]]:
        """Counted segments of a document and the indices of its evidence items."""
        texts = iter(self.texts([i.text for i in items if isinstance(i, TextItem)]))
        segments: list[Segment] = [
            next(texts)
            if isinstance(item, TextItem)
            else self.image(inside(base, item.image, where, f"segments.{i}.image"), where)
            for i, item in enumerate(items)
        ]
        return segments, [i for i, item in enumerate(items) if getattr(item, "evidence", False)]


def inside(base: Path, name: str, where: str, field: str) -> Path:
    """``base / name``, refused unless it stays inside ``base`` (the input file's folder)."""
    why = confined(base, name, f"{base}/")
    if why is not None:
        raise RecordError(f"{where}: {field}: {name!r} {why}")
    return base / name


def sample_times(count: int, fps: float) -> list[int]:
    """Indices of the frames at 0, 1, 2, ... seconds of a ``count``-frame video at ``fps``."""
    indices: list[int] = []
    second = 0
    while (index := round(second * fps)) < count:
        indices.append(index)
        second += 1
    return indices


def event_starts(events: Sequence[tuple[float, float]], seconds: int) -> list[int]:
    """Indices in the 1 fps sequence where an event starts, after the first frame (the boundaries)."""
    return sorted({s for start, _ in events if 0 < (s := int(-(-start // 1))) < seconds})
