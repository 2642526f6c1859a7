"""Needles and their near-duplicate distractors: families whose members differ only in the core entity.

A text family is one sentence template with five entities ("The first band to play on the Moon ..." vs
"... on Venus ..."); an image family is one synthetic object drawn five times, identical but for its
colour. Each member is the needle of its own query and a look-alike distractor for the others' queries
in the same pool, so every pool holds four near-duplicates of each query's needle.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TextFamily:
    key: str
    needle: str
    """Template with ``{entity}``."""
    query: str
    entities: tuple[str, ...]


@dataclass(frozen=True)
class ImageFamily:
    key: str
    shape: str
    entities: tuple[str, ...]
    """Colour names, drawn with the RGB of :data:`COLOURS`."""


@dataclass(frozen=True)
class Needle:
    family: str
    entity: str
    modality: str
    query: str
    text: str | None = None
    shape: str | None = None
    """Image needles: the object drawn in colour ``entity``."""
    image: Path | None = None
    """Image needles from a source's files (``needle_sources``): the picture itself."""


TEXT_FAMILIES = (
    TextFamily(
        "band",
        "The first band to play on {entity} was the Virtual Rocket Band.",
        "Which band was the first to play on {entity}?",
        ("the Moon", "Venus", "Mars", "Jupiter", "Saturn"),
    ),
    TextFamily(
        "pie",
        "The secret ingredient in the {entity} pie is a pinch of smoked lavender.",
        "What is the secret ingredient in the {entity} pie?",
        ("rhubarb", "pumpkin", "cherry", "pecan", "apricot"),
    ),
    TextFamily(
        "lighthouse",
        "The lighthouse keeper of {entity} collects antique brass compasses.",
        "What does the lighthouse keeper of {entity} collect?",
        ("Oslo", "Lisbon", "Dublin", "Tallinn", "Valparaiso"),
    ),
    TextFamily(
        "archive",
        "The password to the old archive in {entity} is silver kettle.",
        "What is the password to the old archive in {entity}?",
        ("Kyoto", "Nairobi", "Quito", "Reykjavik", "Hobart"),
    ),
    TextFamily(
        "chess",
        "The winner of the {entity} chess tournament was a retired violinist.",
        "Who won the {entity} chess tournament?",
        ("Zurich", "Havana", "Cairo", "Helsinki", "Montreal"),
    ),
)

COLOURS = {
    "red": (214, 39, 40),
    "blue": (31, 119, 180),
    "green": (44, 160, 44),
    "yellow": (230, 200, 20),
    "purple": (148, 103, 189),
}
IMAGE_FAMILIES = tuple(
    ImageFamily(shape, shape, tuple(COLOURS))
    for shape in ("triangle", "circle", "square", "hexagon", "diamond")
)
IMAGE_QUERY = "Find the picture of a {entity} {shape}."


def text_needles(families: int) -> list[Needle]:
    return [
        Needle(f.key, e, "text", f.query.format(entity=e), text=f.needle.format(entity=e))
        for f in TEXT_FAMILIES[:families]
        for e in f.entities
    ]


def image_needles(families: int) -> list[Needle]:
    return [
        Needle(f.key, e, "image", IMAGE_QUERY.format(entity=e, shape=f.shape), shape=f.shape)
        for f in IMAGE_FAMILIES[:families]
        for e in f.entities
    ]
