"""Dense video captions (ActivityNet Captions; YoukuDenseCaption) for Temporal Summarization.

Published format (ActivityNet Captions ``train.json`` / ``val_1.json``): one JSON object keyed by
video id, ``{"v_x": {"duration": seconds, "timestamps": [[start, end], ...], "sentences": [str, ...]}}``.
Videos are not decoded here: extract each one's frames at 1 fps first into a folder named by its id
beside the JSON file (``ffmpeg -i v_x.mp4 -vf fps=1 v_x/%05d.png``). The events are the timestamps in
start order; the query is the event sequence "First, ... Then, ... Finally, ..." of their sentences.

YoukuDenseCaption's README names its files (``meta_files/*.csv``, ``benchmark_files/*.json``) but not
their columns, so the kit reads its captions in the ActivityNet layout above. Its captions are Chinese:
the paper's English translation is model-made and handed in as ``model_output`` (JSONL ``{"id": video
id, "sentences": [str, ...]}``, one sentence per event, in the source's order). For ActivityNet the
same file is optional and rewrites a video's sentences where given.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import Field, NonNegativeFloat, PositiveFloat

from milebench.benchmarks.mmlongembed.sources.common import (
    PublishedSource,
    SourceError,
    StepLine,
    needed,
    read_json,
    record,
    step_outputs,
)
from milebench.benchmarks.mmlongembed.task_inputs import VideoInput
from milebench.benchmarks.mmlongembed.task_kinds import Task
from milebench.spec.base import Spec

TASK = Task.TEMPORAL_SUMMARIZATION


class Video(Spec, extra="ignore"):
    duration: PositiveFloat
    timestamps: tuple[tuple[NonNegativeFloat, NonNegativeFloat], ...] = Field(min_length=2)
    sentences: tuple[str, ...] = Field(min_length=2)


class Sentences(StepLine):
    """A line of the translation (or rewrite) output: the video's event sentences."""

    sentences: tuple[str, ...] = Field(min_length=2)


def event_query(sentences: Sequence[str]) -> str:
    """The event sequence as the paper's queries read ("First ... Then ... Finally ...")."""
    said = [s.strip().rstrip(".") + "." for s in sentences]
    middle = [f"Then, {s[0].lower()}{s[1:]}" for s in said[1:-1]]
    return " ".join(
        [
            f"First, {said[0][0].lower()}{said[0][1:]}",
            *middle,
            f"Finally, {said[-1][0].lower()}{said[-1][1:]}",
        ]
    )


def _input(vid: str, video: Video, sentences: Sequence[str], where: str) -> VideoInput:
    if not len(video.timestamps) == len(video.sentences) == len(sentences):
        raise SourceError(
            f"{where}: timestamps, sentences: {len(video.timestamps)} events, {len(video.sentences)}"
            f" sentences{'' if sentences is video.sentences else f', {len(sentences)} translated'}; one each"
        )
    order = sorted(range(len(sentences)), key=lambda i: video.timestamps[i][0])
    fields = {
        "id": vid,
        "query": event_query([sentences[i] for i in order]),
        "frames": vid,
        "fps": 1.0,
        "events": [video.timestamps[i] for i in order],
    }
    return record(fields, VideoInput, where)


def _load(path: Path, model_output: Path | None, translated: bool, name: str) -> list[tuple[str, VideoInput]]:
    raw = read_json(path, f"{name} captions")
    if not isinstance(raw, dict) or not raw:
        raise SourceError(f"{path}: an object of videos keyed by id expected")
    step = step_outputs(
        model_output, Sentences, "translation" if translated else "rewrite", translated, "model_output"
    )
    out = []
    for vid, value in raw.items():
        where = f"{path}: video {vid}"
        video = record(value, Video, where)
        given = needed(step, vid, model_output, where).sentences if translated else None
        if not translated and vid in step:
            given = step[vid].sentences
        out.append((where, _input(vid, video, given or video.sentences, where)))
    return out


def load_activitynet(path: Path, model_output: Path | None) -> list[tuple[str, VideoInput]]:
    return _load(path, model_output, False, "ActivityNet Captions")


def load_youku(path: Path, model_output: Path | None) -> list[tuple[str, VideoInput]]:
    return _load(path, model_output, True, "YoukuDenseCaption")


SOURCES = (
    PublishedSource("activitynet-captions", TASK, load_activitynet),
    PublishedSource("youku-dense-caption", TASK, load_youku),
)
