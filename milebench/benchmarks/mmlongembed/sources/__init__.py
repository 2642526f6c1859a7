"""Loaders of the published formats of the paper's real-task sources, by the name a run spec gives
(``real_tasks[].source``); ``kit`` is the kit's own JSONL (``task_inputs``). Each loader reads its
source's files into the kit's input records, so pictures stay confined to the input's folder and
counting and pools are the same for every source. Visual Grounding's needle sources are in
``needle_sources``, OBELICS documents in ``haystack``."""

from __future__ import annotations

from milebench.benchmarks.mmlongembed.sources import (
    dense_captions,
    govreport,
    hotpotqa,
    mmdocrag,
    mmlongbench_doc,
)
from milebench.benchmarks.mmlongembed.sources.common import Loader
from milebench.benchmarks.mmlongembed.task_kinds import Task

SOURCES: dict[str, tuple[Task, Loader]] = {
    s.name: (s.task, s.load)
    for module in (hotpotqa, mmdocrag, govreport, mmlongbench_doc, dense_captions)
    for s in module.SOURCES
}
"""Every published source by name, as each loader's module declares it."""
