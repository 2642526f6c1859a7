"""The Visual Grounding set on disk: four JSONL files and an image folder, one record per line.

``queries.jsonl``     ``{"id", "text", "subset", "breakdown", "bin", "depth", "needle_modality",
                      "interference", "family", "entity"}``: a short text query.
``candidates.jsonl``  ``{"id", "segments", "length", "bin", "depth", "realised_depth", "needle_segment",
                      "interference"}``: a long document as ordered segments, each
                      ``{"kind": "text", "text", "tokens"}`` or ``{"kind": "image", "image", "sha256",
                      "width", "height", "tokens"}`` (``image`` relative to the set folder); ``tokens`` by the
                      run's counting rule, ``length`` their sum.
``pools.jsonl``       ``{"query", "candidates"}``: the candidates a query is ranked against (its cell).
``qrels.jsonl``       ``{"query", "candidate", "relevance"}``: judgments (1: the needle's candidate).
``images/<sha256>.png``  every image, named by its content hash.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from milebench.spec.base import Spec

QUERIES = "queries.jsonl"
CANDIDATES = "candidates.jsonl"
POOLS = "pools.jsonl"
QRELS = "qrels.jsonl"
IMAGES = "images"


class TextSegment(Spec):
    kind: Literal["text"]
    text: str
    tokens: int = Field(ge=0)


class ImageSegment(Spec):
    kind: Literal["image"]
    image: str = Field(description="Path relative to the set folder.")
    sha256: str
    width: int = Field(ge=1)
    height: int = Field(ge=1)
    tokens: int = Field(ge=1)


Segment = Annotated[TextSegment | ImageSegment, Field(discriminator="kind")]


class Query(Spec):
    id: str
    text: str
    subset: str = Field(description="The unit of the macro average (the paper's subsets).")
    breakdown: str | None = Field(
        default=None,
        description="A finer split reported beside the subsets, outside the macro average (Visual Grounding:"
        " needle modality / haystack modality).",
    )
    bin: int
    depth: int
    needle_modality: Literal["text", "image"]
    interference: str
    family: str
    entity: str


class Candidate(Spec):
    id: str
    segments: tuple[Segment, ...]
    length: int = Field(description="Sum of the segments' tokens (the counting rule).")
    bin: int
    depth: int
    realised_depth: float = Field(description="Share of the haystack's tokens before the needle.")
    needle_segment: int = Field(description="Index of the needle in ``segments``.")
    interference: str


class Pool(Spec):
    query: str
    candidates: tuple[str, ...]


class Qrel(Spec):
    query: str
    candidate: str
    relevance: int = Field(ge=0)
