"""PaperSpec: the published numbers with their captions, footnotes and known inconsistencies."""

from __future__ import annotations

from pydantic import Field, model_validator

from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import Group
from milebench.spec.base import Number, Spec, SpecError, load_spec
from milebench.spec.folder import PAPER
from milebench.spec.model import Section

PAPER_MODE = Mode.MULTI_IMAGE
"""The mode of the paper's main table; published values are shown beside this mode's scores only."""


class MainRow(Spec):
    paper_name: str
    model: str = Field(description="The model spec this row belongs to.")
    section: Section
    size: str | None
    groups: dict[Group, Number]
    overall_real: Number
    overall_diag: Number

    @model_validator(mode="after")
    def _every_group(self) -> MainRow:
        missing = [g.value for g in Group if g not in self.groups]
        if missing:
            raise ValueError(f"groups lacks {', '.join(missing)}: the paper prints all {len(Group)}")
        return self


class Inconsistency(Spec):
    """A printed value that the paper's own rule does not reproduce, kept as data."""

    model: str
    column: str
    printed: Number
    computed: Number
    note: str


class MainTable(Spec):
    caption: str
    footnotes: dict[str, str] = Field(default_factory=dict, description="Model spec name -> footnote.")
    rows: tuple[MainRow, ...]
    inconsistencies: tuple[Inconsistency, ...] = ()


class ContaminationRow(Spec):
    model: str
    regular: Number
    adv: Number
    delta: Number


class ContaminationTable(Spec):
    caption: str
    rows: tuple[ContaminationRow, ...]


class QuantityRow(Spec):
    model: str
    few: Number
    medium: Number
    many: Number


class ImageQuantityTable(Spec):
    note: str
    rows: tuple[QuantityRow, ...]


class PaperSpec(Spec):
    source: str = Field(description="Citation with arXiv id and version.")
    main_table: MainTable
    contamination: ContaminationTable
    image_quantity: ImageQuantityTable


def _paper_models(paper: PaperSpec) -> list[tuple[str, str]]:
    """(field path, model name) for every place the paper spec names a model spec."""
    table = paper.main_table
    return [
        *((f"main_table.rows.{i}.model", row.model) for i, row in enumerate(table.rows)),
        *((f"main_table.footnotes.{name}", name) for name in table.footnotes),
        *((f"main_table.inconsistencies.{i}.model", x.model) for i, x in enumerate(table.inconsistencies)),
        *((f"contamination.rows.{i}.model", row.model) for i, row in enumerate(paper.contamination.rows)),
        *((f"image_quantity.rows.{i}.model", row.model) for i, row in enumerate(paper.image_quantity.rows)),
    ]


def load_paper(specs: Specs) -> PaperSpec:
    """The paper spec of a specs folder (its own, else the shipped one it overlays), each model it names
    checked against the model specs."""
    path = specs.file(PAPER)
    paper = load_spec(path, PaperSpec)
    unknown = [
        (field, f"unknown model {name!r}") for field, name in _paper_models(paper) if name not in specs.models
    ]
    if unknown:
        raise SpecError(path, unknown)
    return paper
