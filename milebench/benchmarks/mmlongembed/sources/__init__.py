"""Loaders of the published formats of the paper's real-task sources, by the name a run spec gives
(``real_tasks[].source``); ``kit`` is the kit's own JSONL (``task_inputs``). Each loader reads its
source's files into the kit's input records, so pictures stay confined to the input's folder and
counting and pools are the same for every source. Visual Grounding's needle sources are in
``needle_sources``, OBELICS documents in ``haystack``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from milebench.benchmarks.mmlongembed.sources import (
    dense_captions,
    govreport,
    hotpotqa,
    mmdocrag,
    mmlongbench_doc,
)
from milebench.benchmarks.mmlongembed.task_inputs import InputRecord
from milebench.benchmarks.mmlongembed.task_spec import Task

Loader = Callable[[Path, Path | None], Sequence[tuple[str, InputRecord]]]
"""(input path, model-assisted step's output or None) -> each record with where it is."""

SOURCES: dict[str, tuple[Task, Loader]] = {
    "hotpotqa": (hotpotqa.TASK, hotpotqa.load),
    "mmdocrag": (mmdocrag.TASK, mmdocrag.load),
    "govreport": (govreport.TASK, govreport.load),
    "mmlongbench-doc": (mmlongbench_doc.TASK, mmlongbench_doc.load),
    "activitynet-captions": (dense_captions.TASK, dense_captions.load_activitynet),
    "youku-dense-caption": (dense_captions.TASK, dense_captions.load_youku),
}
