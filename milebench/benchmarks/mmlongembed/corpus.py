"""The bundled haystack prose (package data), split into sentence-sized segments.

Segments are short so a needle can be inserted close to any depth: sentences, and long sentences further
split after semicolons and colons.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

PROSE = "prose.txt"
_SENTENCE_END = re.compile(r'(?<!\bMr\.)(?<!\bMrs\.)(?<=[.!?;:])["\u201d]?\s+')


def split_sentences(text: str) -> list[str]:
    """Sentence-sized pieces of a paragraph, each stripped, none empty."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


@cache
def bundled_sentences() -> tuple[str, ...]:
    """The bundled public-domain prose, in order, as sentences."""
    text = resources.files("milebench.benchmarks.mmlongembed").joinpath("data", PROSE).read_text("utf-8")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    paragraphs = "\n".join(lines).split("\n\n")
    return tuple(s for paragraph in paragraphs for s in split_sentences(" ".join(paragraph.split())))
