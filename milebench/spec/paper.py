"""PaperSpec: the published numbers with their captions, footnotes and known inconsistencies."""

from __future__ import annotations

from pydantic import Field

from milebench.spec.base import Spec
from milebench.spec.model import Section
from milebench.spec.task import Group


class MainRow(Spec):
    paper_name: str
    model: str = Field(description="The model spec this row belongs to.")
    section: Section
    size: str | None
    groups: dict[Group, float]
    overall_real: float
    overall_diag: float


class Inconsistency(Spec):
    """A printed value that the paper's own rule does not reproduce, kept as data."""

    model: str
    column: str
    printed: float
    computed: float
    note: str


class MainTable(Spec):
    caption: str
    footnotes: dict[str, str] = Field(default_factory=dict, description="Model spec name -> footnote.")
    rows: tuple[MainRow, ...]
    inconsistencies: tuple[Inconsistency, ...] = ()


class ContaminationRow(Spec):
    model: str
    regular: float
    adv: float
    delta: float


class ContaminationTable(Spec):
    caption: str
    rows: tuple[ContaminationRow, ...]


class QuantityRow(Spec):
    model: str
    few: float
    medium: float
    many: float


class ImageQuantityTable(Spec):
    note: str
    rows: tuple[QuantityRow, ...]


class PaperSpec(Spec):
    source: str = Field(description="Citation with arXiv id and version.")
    main_table: MainTable
    contamination: ContaminationTable
    image_quantity: ImageQuantityTable
