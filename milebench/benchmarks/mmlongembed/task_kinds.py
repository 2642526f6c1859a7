"""The real tasks and the name of the kit's own input format: below the specs, the input records and the
published sources' loaders, which all name them."""

from __future__ import annotations

from enum import StrEnum

KIT = "kit"
"""The kit's own JSONL input format (``task_inputs``), as opposed to a published source's."""


class Task(StrEnum):
    MULTI_SOURCE_REASONING = "multi-source-reasoning"
    LOGICAL_SUMMARIZATION = "logical-summarization"
    TEMPORAL_SUMMARIZATION = "temporal-summarization"
