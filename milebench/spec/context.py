"""Where each number of a model's context budget comes from.

The paper truncated every model to its own context (confirmed by the authors), but the official code
ships the two settings for no model, so each number the kit uses has to be traced: to the paper, the
official code, the checkpoint's config, the model's own code base or its card (provider documentation
for API models). A number without a source is not invented: the spec leaves it null and its source
says ``none`` and why, which the report shows beside the truncation figures.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from milebench.spec.base import Spec


class SourceKind(StrEnum):
    PAPER = "paper"
    """The MileBench paper (its text or tables, as the kit's reference notes record them)."""
    OFFICIAL_CODE = "official-code"
    """github.com/MileBench/MileBench: configs, generate.py, workers."""
    MODEL_CONFIG = "model-config"
    """The checkpoint's own config files (config.json, the vision tower's config)."""
    MODEL_CODE = "model-code"
    """The model's original code base (its defaults)."""
    MODEL_CARD = "model-card"
    """The model card, the model's paper, or the provider's documentation."""
    KIT = "kit"
    """Chosen by the kit for a model it builds itself (tiny test checkpoints)."""
    NONE = "none"
    """No source: the value stays unknown (null) and ``detail`` says why."""


class ContextSource(Spec):
    """One number's source: what kind, and exactly where (file and key, section, URL) or why none."""

    kind: SourceKind
    detail: str = Field(min_length=1, description="Where exactly, or (kind none) why there is no value.")


BUDGET_FIELDS: tuple[str, ...] = ("max_context_len", "n_tokens_per_image", "max_images")
"""The ModelSpec fields a source can be given for."""
REQUIRED_FIELDS: tuple[str, ...] = ("max_context_len", "n_tokens_per_image")
"""Every paper model states these two, with a value or a ``none`` source saying why not."""


class ContextSources(Spec):
    """Source of each context setting of a model spec, keyed like the spec's own fields."""

    max_context_len: ContextSource | None = None
    n_tokens_per_image: ContextSource | None = None
    max_images: ContextSource | None = None


def source_problems(
    values: dict[str, int | None], sources: ContextSources, required: bool
) -> list[tuple[str, str]]:
    """(field, message) for every setting whose source does not match its value.

    A value needs a source that is not ``none``; a ``none`` source needs a null value. With
    ``required`` (paper models), ``max_context_len`` and ``n_tokens_per_image`` need a source either
    way, and any other set value needs one too.
    """
    problems = []
    for name in BUDGET_FIELDS:
        value, source = values[name], getattr(sources, name)
        where = f"context_sources.{name}"
        if source is None:
            if required and (name in REQUIRED_FIELDS or value is not None):
                expected = "its source" if value is not None else "kind none and why the value is unknown"
                problems.append((where, f"{name} is {value}: give {expected}"))
        elif source.kind is SourceKind.NONE and value is not None:
            problems.append((where, f"kind none, but {name} is {value}: name its source or set it null"))
        elif source.kind is not SourceKind.NONE and value is None:
            problems.append((where, f"kind {source.kind.value}, but {name} is null: set the value"))
    return problems
