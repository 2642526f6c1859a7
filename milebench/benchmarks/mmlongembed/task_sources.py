"""A real-task dataset's records from whichever format its spec names: the kit's JSONL (``task_inputs``) or a
published source's own files (``sources``), counted into sources for the pools, and the files a rule must
declare for it. Above both, since the published sources read into the kit's records."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from milebench.benchmarks.mmlongembed.records import ImageSegment
from milebench.benchmarks.mmlongembed.task_inputs import (
    IMAGE_SUFFIXES,
    INPUTS,
    InputRecord,
    Reader,
    ReasoningInput,
    Source,
    SummaryInput,
    VideoInput,
    event_starts,
    inside,
    read_inputs,
    sample_times,
)
from milebench.benchmarks.mmlongembed.task_kinds import KIT, Task
from milebench.benchmarks.mmlongembed.task_spec import RealTask
from milebench.image_files import confined
from milebench.io import UnreadableText, read_utf8
from milebench.record_files import RecordError


def input_rows(
    task: Task, path: Path, source: str = KIT, model_output: Path | None = None
) -> Sequence[tuple[str, InputRecord]]:
    """The dataset's records, from the kit's JSONL or a published source's own files (``sources``)."""
    if source == KIT:
        return read_inputs(path, INPUTS[task])
    from milebench.benchmarks.mmlongembed.sources import SOURCES

    return SOURCES[source][1](path, model_output)


def load_sources(
    task: Task, path: Path, reader: Reader, source: str = KIT, model_output: Path | None = None
) -> list[Source]:
    """The dataset's queries and documents, counted; errors name the file, the line and the query (a
    published source's exit 2, as the file is refused as given)."""
    if source == KIT:
        return _load_sources(task, path, reader, source, model_output)
    from milebench.benchmarks.mmlongembed.sources.common import SourceError

    try:
        return _load_sources(task, path, reader, source, model_output)
    except SourceError:
        raise
    except RecordError as err:
        raise SourceError(str(err)) from None


def _load_sources(
    task: Task, path: Path, reader: Reader, source: str, model_output: Path | None
) -> list[Source]:
    base = path if path.is_dir() else path.parent
    out: list[Source] = []
    for where, row in input_rows(task, path, source, model_output):
        if isinstance(row, ReasoningInput):
            segments, evidence = reader.items(row.segments, base, where)
            out.append(Source(row.id, row.query, tuple(segments), where, evidence=tuple(evidence)))
        elif isinstance(row, SummaryInput):
            if row.segments is not None:
                segments, _ = reader.items(row.segments, base, where)
            else:
                pages = reader.folder_images(base, row.pages or "", where, "pages")
                segments = [reader.image(p, where) for p in pages]
            spare: tuple[ImageSegment, ...] = ()
            if row.spare_pages is not None:
                spare_paths = reader.folder_images(base, row.spare_pages, where, "spare_pages")
                spare = tuple(reader.image(p, where) for p in spare_paths)
            elif row.spare_segments is not None:
                spare = tuple(
                    reader.image(inside(base, item.image, where, f"spare_segments.{i}.image"), where)
                    for i, item in enumerate(row.spare_segments)
                )
            out.append(Source(row.id, row.summary, tuple(segments), where, spare=spare))
        else:
            assert isinstance(row, VideoInput)  # the third task's record
            frames = reader.folder_images(base, row.frames, where, "frames")
            picked = [frames[i] for i in sample_times(len(frames), row.fps)]
            starts = event_starts(row.events, len(picked))
            if not starts:
                raise RecordError(f"{where}: events: no event boundary falls inside the video")
            out.append(
                Source(
                    row.id,
                    row.query,
                    tuple(reader.image(p, where) for p in picked),
                    where,
                    events=tuple(starts),
                )
            )
    return out


def _rows(task: Task, path: Path, source: str, model_output: Path | None) -> list[object]:
    """The input's records as JSON values, as far as they read (errors are ``load_sources``')."""
    if source != KIT:
        try:
            return [r.model_dump() for _, r in input_rows(task, path, source, model_output)]
        except RecordError:
            return []
    try:
        lines = read_utf8(path).splitlines()
    except (OSError, UnreadableText):
        return []
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except (ValueError, RecursionError):
            continue
    return rows


def _files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else [path]


def referenced_files(
    task: Task, path: Path, source: str = KIT, model_output: Path | None = None
) -> list[Path]:
    """The input file(s), the step output and every picture they name (folders listed), for a rule's
    declared inputs; records that do not parse and pictures outside the input's folder are left out
    here and reported by ``load_sources``."""
    found = [*_files(path), *([model_output] if model_output is not None else [])]
    base = path if path.is_dir() else path.parent

    def named(name: object) -> bool:
        return isinstance(name, str) and confined(base, name, "") is None

    for row in _rows(task, path, source, model_output):
        if not isinstance(row, dict):
            continue
        items = [*(row.get("segments") or []), *(row.get("spare_segments") or [])]
        found += [base / i["image"] for i in items if isinstance(i, dict) and named(i.get("image"))]
        for key in ("pages", "spare_pages", "frames"):
            if named(row.get(key)) and (folder := base / row[key]).is_dir():
                found += sorted(
                    p
                    for p in folder.iterdir()
                    if p.suffix.lower() in IMAGE_SUFFIXES and named(str(p.relative_to(base)))
                )
    return list(dict.fromkeys(found))


def declared_inputs(spec: RealTask, specs_root: Path) -> list[Path]:
    """What ``embed-pools`` reads for one dataset: its input, the pictures it names, its padding text."""
    padding = spec.padding_path(specs_root)
    files = referenced_files(
        spec.task, spec.input_path(specs_root), spec.source, spec.model_output_path(specs_root)
    )
    return [*files, *([padding] if padding else [])]
