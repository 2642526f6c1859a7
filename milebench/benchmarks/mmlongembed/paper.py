"""The MMLongEmbed paper's published numbers as data (``specs/mmlongembed/paper.yaml``).

What the paper prints that a run can be held against: each model's average P@1 (the macro average over
its 14 subsets), the model-scale test, the position-bias tests and the interference figures. A row names
the kit's model spec (``model``) where the kit has one; ``None`` keeps the published value on show with
no run able to score it. Values are in the paper's units: P@1 and SD in points (x100), the scale
difference in points, p-values and Cohen's d as printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from milebench.benchmarks.mmlongembed.spec import EmbedSpecs, Modality, load_embed_specs, specs_folder
from milebench.spec.base import Number, Spec, SpecError, load_spec
from milebench.spec.folder import PAPER


class AverageRow(Spec):
    paper_name: str
    model: str | None = Field(description="The kit's model spec; None where the kit has none.")
    value: Number = Field(description="Average P@1 over the paper's subsets, x100.")


class Averages(Spec):
    subsets: int = Field(ge=1, description="Subsets the average weighs equally (the paper: 14).")
    note: str
    rows: tuple[AverageRow, ...]


class Alias(Spec):
    """A model the paper names outside its averages table, with the kit's spec of it."""

    paper_name: str
    model: str


class ScaleRow(Spec):
    """Largest minus smallest member of a family, on query-level P@1 (micro average); the p-value and d
    where printed."""

    family: str
    larger: str = Field(description="Paper name of the larger model.")
    smaller: str
    difference: Number = Field(description="Points (x100).")
    p_value: Number | None = None
    cohens_d: Number | None = None
    table: str = ""


class SubsetRow(Spec):
    """A model's P@1 on one of the paper's subsets (``<task>/<dataset>/<easy|hard>``, the dataset by the
    name a run gives it, e.g. ``mmdocrag``)."""

    paper_name: str
    subset: str
    value: Number
    table: str = ""


class PoolRow(Spec):
    """A model's P@1 on a task's Easy or Hard pools of one length (the task's datasets together)."""

    paper_name: str
    task: str
    difficulty: Literal["easy", "hard"]
    bin: int
    value: Number
    table: str = ""


class PairRow(Spec):
    """Two models' scores under one haystack modality, printed without saying which is whose: the lower
    and the higher of the two are held against the lower and higher of ours."""

    paper_names: tuple[str, str]
    modality: Modality
    low: Number
    high: Number
    table: str = ""


class DepthRow(Spec):
    """A model's P@1 per depth level as far as printed: the range of the middle levels (every level but
    the first and last) and the ends (the mean of the first and last levels)."""

    paper_name: str
    middle_low: Number
    middle_high: Number
    ends: Number
    table: str = ""


class PositionRow(Spec):
    """A Wald test of the position-bias model, printed as a bound on its p-value for every model."""

    term: str
    test: Literal["depth", "quadratic"] = Field(description="The kit's test of it (``DepthEffects``).")
    df: int = Field(ge=1)
    p_below: Number


class InterferenceRow(Spec):
    """A model's P@1 under text / image / mixed haystacks, as far as printed: exact values or a range,
    and the sample SD."""

    paper_name: str
    model: str | None = None
    scores: dict[Modality, Number] = Field(default_factory=dict)
    low: Number | None = None
    high: Number | None = None
    sd: Number | None = None


class EmbedPaper(Spec):
    source: str
    averages: Averages
    aliases: tuple[Alias, ...] = ()
    scale: tuple[ScaleRow, ...]
    scale_d_at_most: Number | None = Field(
        default=None, description="A bound the paper puts on every family's Cohen's d."
    )
    subsets: tuple[SubsetRow, ...] = ()
    pools: tuple[PoolRow, ...] = ()
    position: tuple[PositionRow, ...]
    depth_means: tuple[DepthRow, ...] = ()
    interference: tuple[InterferenceRow, ...]
    interference_pairs: tuple[PairRow, ...] = ()
    quoted: tuple[str, ...] = Field(
        default=(), description="Printed figures and findings the kit cannot tie to one model or run."
    )
    inconsistencies: tuple[str, ...] = Field(
        default=(),
        description="Printed figures that cannot all hold at once, with the reading the kit takes.",
    )


def kit_names(paper: EmbedPaper) -> dict[str, str]:
    """Paper name -> the kit's model spec, for every model the kit has."""
    named = {r.paper_name: r.model for r in paper.averages.rows if r.model is not None}
    return named | {a.paper_name: a.model for a in paper.aliases}


def load_embed_paper(specs: EmbedSpecs) -> EmbedPaper:
    """The paper spec beside the run specs, each named model checked against the model specs and each
    paper name a row uses known (from the averages table or the aliases)."""
    path = specs.file(PAPER)
    paper = load_spec(path, EmbedPaper)
    named = [
        *((f"averages.rows.{i}.model", r.model) for i, r in enumerate(paper.averages.rows)),
        *((f"aliases.{i}.model", r.model) for i, r in enumerate(paper.aliases)),
        *((f"interference.{i}.model", r.model) for i, r in enumerate(paper.interference)),
    ]
    problems = [
        (field, f"unknown model {m!r}") for field, m in named if m is not None and m not in specs.models
    ]
    known = kit_names(paper)
    used = [
        *(
            (f"scale.{i}.{k}", getattr(r, k))
            for i, r in enumerate(paper.scale)
            for k in ("larger", "smaller")
        ),
        *((f"subsets.{i}.paper_name", r.paper_name) for i, r in enumerate(paper.subsets)),
        *((f"pools.{i}.paper_name", r.paper_name) for i, r in enumerate(paper.pools)),
        *((f"depth_means.{i}.paper_name", r.paper_name) for i, r in enumerate(paper.depth_means)),
        *(
            (f"interference_pairs.{i}.paper_names", n)
            for i, r in enumerate(paper.interference_pairs)
            for n in r.paper_names
        ),
    ]
    problems += [
        (field, f"paper name {n!r} is in neither averages.rows nor aliases")
        for field, n in used
        if n not in known
    ]
    if problems:
        raise SpecError(path, problems)
    return paper


def paper_path(specs_root: Path) -> Path:
    return specs_folder(specs_root) / PAPER


def check_specs(specs_root: Path) -> str:
    """MMLongEmbed's part of ``check-specs``: its runs' embedders and its paper spec's models exist."""
    specs = load_embed_specs(specs_root)
    paper = load_embed_paper(specs)
    return f"{len(specs.models)} embedders, {len(specs.runs)} runs, {len(paper.averages.rows)} paper rows"
