"""The paper's constructions of real-task candidates, on counted segments, exact in tokens.

- Padding: a document is brought to a length pool with unrelated text inserted between its blocks so
  that each block starts at the same share of the document as before (the evidence keeps its relative
  position); the document's own segments are never cut.
- Length-matched replacement: a span of segments is swapped for text of exactly the same token count,
  so a Hard negative is exactly as long as its positive.
- Logical Summarization's regions: the first 25%, the middle 50% and the last 25% of a document's
  tokens, cut at the segment boundaries nearest those shares.
- Video: the 1 fps frame sequence cut at its event boundaries, segments reversed or block-permuted.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence

from milebench.benchmarks.mmlongembed.lengths import cut_text
from milebench.benchmarks.mmlongembed.records import ImageSegment, TextSegment
from milebench.preprocess.tokenizer import HFTokenizer
from milebench.record_files import RecordError

Segment = TextSegment | ImageSegment

MAX_FAILED_CUTS = 64
"""Text pieces in a row that cannot give a single token before a filler gives up."""

SUMMARY_REGIONS = {"first": (0.0, 0.25), "middle": (0.25, 0.75), "last": (0.75, 1.0)}


class Filler:
    """Text of an exact token count, drawn in order from an endless stream of counted pieces."""

    def __init__(self, pieces: Sequence[TextSegment], tokenizer: HFTokenizer, start: int = 0) -> None:
        usable = [p for p in pieces if p.tokens > 0]
        if not usable:
            raise RecordError("no text to pad or replace with")
        self.stream: Iterator[TextSegment] = itertools.islice(itertools.cycle(usable), start, None)
        self.tokenizer = tokenizer

    def take(self, tokens: int) -> list[TextSegment]:
        """Pieces summing to exactly ``tokens``: whole while they fit, then cut at token offsets."""
        out: list[TextSegment] = []
        failed = 0
        while tokens > 0:
            piece = next(self.stream)
            if piece.tokens <= tokens:
                out.append(piece)
                tokens -= piece.tokens
                continue
            part = cut_text(self.tokenizer, piece.text, tokens, head=True)
            if part is None or part[1] == 0:
                failed += 1
                if failed > MAX_FAILED_CUTS:
                    raise RecordError(f"padding text cannot give the last {tokens} tokens")
                continue
            failed = 0
            out.append(TextSegment(kind="text", text=part[0], tokens=part[1]))
            tokens -= part[1]
        return out


def filler(pieces: Sequence[TextSegment], tokenizer: HFTokenizer, rng: random.Random) -> Filler:
    """A filler starting at a random piece of ``pieces``."""
    return Filler(pieces, tokenizer, rng.randrange(max(1, len(pieces))))


def blocks(segments: Sequence[Segment], marks: Sequence[int]) -> list[list[Segment]]:
    """``segments`` split so each marked segment is a block of its own (the rest in maximal runs)."""
    out: list[list[Segment]] = []
    marked = set(marks)
    for index, segment in enumerate(segments):
        if index in marked or not out or (index - 1) in marked:
            out.append([segment])
        else:
            out[-1].append(segment)
    return out


def pad(parts: Sequence[Sequence[Segment]], length: int, fill: Filler) -> tuple[list[Segment], list[int]]:
    """The blocks padded to exactly ``length`` tokens, each starting at its original share of the
    document (to a token); returns the segments and the index where each block starts."""
    sizes = [sum(s.tokens for s in part) for part in parts]
    total = sum(sizes)
    if total > length:
        raise RecordError(f"document of {total} tokens is longer than the length pool ({length})")
    out: list[Segment] = []
    starts: list[int] = []
    used = offset = 0
    for part, size in zip(parts, sizes, strict=True):
        target = round(offset * length / total) if total else 0
        gap = max(0, target - used)
        out.extend(fill.take(gap))
        used += gap
        starts.append(len(out))
        out.extend(part)
        used += size
        offset += size
    out.extend(fill.take(length - used))
    return out, starts


def replace(segments: Sequence[Segment], start: int, end: int, fill: Filler) -> list[Segment]:
    """``segments[start:end]`` swapped for text of exactly their token count."""
    tokens = sum(s.tokens for s in segments[start:end])
    return [*segments[:start], *fill.take(tokens), *segments[end:]]


def boundary(segments: Sequence[Segment], share: float) -> int:
    """The segment boundary whose token offset is nearest ``share`` of the document."""
    offsets = list(itertools.accumulate((s.tokens for s in segments), initial=0))
    target = share * offsets[-1]
    return min(range(len(offsets)), key=lambda j: (abs(offsets[j] - target), j))


def summary_region(segments: Sequence[Segment], region: str) -> tuple[int, int]:
    """Segment range ``[start, end)`` of a Logical Summarization region (first, middle or last)."""
    low, high = SUMMARY_REGIONS[region]
    start, end = boundary(segments, low), boundary(segments, high)
    if start >= end:
        raise RecordError(f"document too short to split into its {region} {round((high - low) * 100)}%")
    return start, end


def video_segments(count: int, starts: Sequence[int]) -> list[range]:
    """Frame index ranges of a video's event segments, cut at the event starts."""
    cuts = [0, *sorted(starts), count]
    return [range(a, b) for a, b in itertools.pairwise(cuts) if a < b]


def reversed_order(segments: int) -> list[int]:
    return list(range(segments))[::-1]


def permuted_order(segments: int, rng: random.Random) -> list[int] | None:
    """A seeded order of the segments that is neither the original nor its reversal (None below three
    segments: none exists)."""
    if segments < 3:
        return None
    same = (list(range(segments)), reversed_order(segments))
    while (order := rng.sample(range(segments), segments)) in same:
        pass
    return order


def reorder(frames: Sequence[Segment], starts: Sequence[int], order: Sequence[int]) -> list[Segment]:
    """The frames with their event segments in ``order`` (frames inside a segment keep theirs)."""
    parts = video_segments(len(frames), starts)
    return [frames[i] for k in order for i in parts[k]]
