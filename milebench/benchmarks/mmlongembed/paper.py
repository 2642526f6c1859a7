"""The MMLongEmbed paper's published numbers as data (``specs/mmlongembed/paper.yaml``).

What the paper prints that a run can be held against: each model's average P@1 (the macro average over
its 14 subsets), the model-scale test, the position-bias tests and the interference figures. A row names
the kit's model spec (``model``) where the kit has one; ``None`` keeps the published value on show with
no run able to score it. Values are in the paper's units: P@1 and SD in points (x100), the scale
difference in points, p-values and Cohen's d as printed.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from milebench.benchmarks.mmlongembed.spec import EmbedSpecs, Modality
from milebench.spec.base import Number, Spec, SpecError, load_spec

PAPER = "paper.yaml"


class AverageRow(Spec):
    paper_name: str
    model: str | None = Field(description="The kit's model spec; None where the kit has none.")
    value: Number = Field(description="Average P@1 over the paper's subsets, x100.")


class Averages(Spec):
    subsets: int = Field(ge=1, description="Subsets the average weighs equally (the paper: 14).")
    note: str
    rows: tuple[AverageRow, ...]


class ScaleRow(Spec):
    """Largest minus smallest member of a family, on query-level P@1 (micro average)."""

    family: str
    larger: str = Field(description="Paper name of the larger model.")
    smaller: str
    difference: Number = Field(description="Points (x100).")
    p_value: Number
    cohens_d: Number


class PositionRow(Spec):
    """A Wald test of the position-bias model, printed as a bound on its p-value."""

    term: str
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
    sd: Number


class EmbedPaper(Spec):
    source: str
    averages: Averages
    scale: tuple[ScaleRow, ...]
    position: tuple[PositionRow, ...]
    interference: tuple[InterferenceRow, ...]
    quoted: tuple[str, ...] = Field(
        default=(), description="Printed figures and findings the kit cannot tie to one model or run."
    )
    inconsistencies: tuple[str, ...] = Field(
        default=(),
        description="Printed figures that cannot all hold at once, with the reading the kit takes.",
    )


def load_embed_paper(specs: EmbedSpecs) -> EmbedPaper:
    """The paper spec beside the run specs, each named model checked against the model specs."""
    path = specs.root / PAPER
    paper = load_spec(path, EmbedPaper)
    named = [
        *((f"averages.rows.{i}.model", r.model) for i, r in enumerate(paper.averages.rows)),
        *((f"interference.{i}.model", r.model) for i, r in enumerate(paper.interference)),
    ]
    unknown = [
        (field, f"unknown model {m!r}") for field, m in named if m is not None and m not in specs.models
    ]
    if unknown:
        raise SpecError(path, unknown)
    return paper


def paper_path(specs_root: Path) -> Path:
    return Path(specs_root) / "mmlongembed" / PAPER
