"""The Visual Grounding generator: needles in interleaved haystacks, one pool per cell, from a seed.

A cell is (needle modality, interference, length bin, depth). Each of its needles gets its own candidate:
a haystack filled to the bin by the counting rule with the needle inserted at the segment boundary
nearest the depth. The cell's candidates are the pool of each of its queries; a query's one relevant
candidate holds its needle, the look-alikes of its family are the hard distractors. Queries are text
for both needle modalities (an image needle is asked for by its colour and shape).

The paper reports Visual Grounding as two subsets of its macro average, one per needle source
(NeedleBench's text needles, MM-NIAH's image needles): a query's ``subset`` is its needle modality's,
its ``breakdown`` the finer needle modality / haystack modality split the interference analysis reads.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.mmlongembed.haystack import Material, Piece
from milebench.benchmarks.mmlongembed.haystack import referenced_files as haystack_files
from milebench.benchmarks.mmlongembed.images import copy_image, needle_image, save_png
from milebench.benchmarks.mmlongembed.lengths import count_texts, cut_text
from milebench.benchmarks.mmlongembed.needle_sources import mm_niah, needlebench
from milebench.benchmarks.mmlongembed.needles import Needle, image_needles, text_needles
from milebench.benchmarks.mmlongembed.records import Candidate, Pool, Qrel, Query, TextSegment
from milebench.benchmarks.mmlongembed.spec import VisualGrounding
from milebench.benchmarks.mmlongembed.task_spec import under
from milebench.preprocess.tokenizer import HFTokenizer
from milebench.record_files import RecordError
from milebench.spec.folder import DEFAULT_SPECS

log = logging.getLogger(__name__)

MAX_SKIPPED_IMAGES = 8
"""Images too big for the rest of the budget skipped before the haystack is called full."""


@dataclass(frozen=True)
class VgSet:
    queries: list[Query]
    candidates: list[Candidate]
    pools: list[Pool]
    qrels: list[Qrel]


def fill(stream: Iterator[Piece], budget: int, tokenizer: HFTokenizer) -> list[Piece]:
    """Haystack pieces up to ``budget`` tokens: an image that does not fit is skipped, the text piece
    that overflows is cut to fit, so only image-only haystacks can fall short (by less than an image)."""
    pieces: list[Piece] = []
    used = misses = 0
    for piece in stream:
        if used + piece.tokens <= budget:
            pieces.append(piece)
            used += piece.tokens
            if used == budget:
                break
            continue
        if isinstance(piece, TextSegment):
            part = cut_text(tokenizer, piece.text, budget - used, head=True)
            if part is not None:
                pieces.append(TextSegment(kind="text", text=part[0], tokens=part[1]))
            break
        misses += 1
        if misses > MAX_SKIPPED_IMAGES:
            break
    return pieces


def insertion_point(haystack: list[Piece], depth: int) -> tuple[int, float]:
    """The segment boundary whose token offset is nearest ``depth`` % of the haystack, and its share."""
    total = sum(p.tokens for p in haystack)
    offsets = [0]
    for piece in haystack:
        offsets.append(offsets[-1] + piece.tokens)
    target = depth / 100 * total
    index = min(range(len(offsets)), key=lambda j: abs(offsets[j] - target))
    return index, (offsets[index] / total if total else depth / 100)


def _needle_piece(needle: Needle, tokenizer: HFTokenizer, folder: Path) -> Piece:
    if needle.text is not None:
        return TextSegment(kind="text", text=needle.text, tokens=count_texts(tokenizer, [needle.text])[0])
    if needle.image is not None:
        return copy_image(needle.image, folder, f"needle {needle.family}/{needle.entity}")
    return save_png(needle_image(needle.shape or "", needle.entity), folder)


def needles_of(vg: VisualGrounding, modality: str, specs_root: Path) -> list[Needle]:
    """The needle modality's first ``families_of`` families: from the paper's source where the spec
    names its files (``needle_sources``), else the kit's own."""
    families = vg.families_of(modality)
    files = vg.needles
    source = None if files is None else (files.text if modality == "text" else files.image)
    if files is None or source is None:
        return text_needles(families) if modality == "text" else image_needles(families)
    step = files.text_lookalikes if modality == "text" else files.image_queries
    load = needlebench if modality == "text" else mm_niah
    found = load(under(specs_root, source), under(specs_root, step or ""))
    kept = list(dict.fromkeys(n.family for n in found))[:families]
    return [n for n in found if n.family in kept]


def entity_index(needles: list[Needle], needle: Needle) -> int:
    """The needle's place among its family's look-alikes."""
    return [n.entity for n in needles if n.family == needle.family].index(needle.entity)


def subset(modality: str) -> str:
    """The macro-average subset of a needle modality (the paper's NeedleBench and MM-NIAH)."""
    return f"visual-grounding/{modality}-needles"


def cell_id(modality: str, interference: str, length: int, depth: int) -> str:
    return f"vg-{modality}-{interference}-{length:05d}-d{depth:03d}"


def declared_inputs(vg: VisualGrounding, specs_root: Path) -> list[Path]:
    """What ``embed-generate`` reads from the user: haystack documents, needle files, the steps' outputs
    and the pictures they name (none for the kit's own haystack and needles)."""
    found = haystack_files(vg.haystack, specs_root)
    files = vg.needles
    for modality, load in (("text", needlebench), ("image", mm_niah)):
        source = None if files is None else (files.text if modality == "text" else files.image)
        if files is None or source is None:
            continue
        step = under(specs_root, (files.text_lookalikes if modality == "text" else files.image_queries) or "")
        found += [under(specs_root, source), step]
        with contextlib.suppress(RecordError):  # reported by embed-generate
            found += [n.image for n in load(under(specs_root, source), step) if n.image is not None]
    return list(dict.fromkeys(found))


def generate(
    vg: VisualGrounding,
    material: Material,
    tokenizer: HFTokenizer,
    folder: Path,
    specs_root: Path = DEFAULT_SPECS,
) -> VgSet:
    """``specs_root``: where the spec's needle files are named from."""
    out = VgSet([], [], [], [])
    for modality in vg.needle_modalities:
        needles = needles_of(vg, modality, specs_root)
        pieces = [_needle_piece(n, tokenizer, folder) for n in needles]
        for interference in vg.interference:
            for length in vg.bins:
                for depth in vg.depths:
                    cell = cell_id(modality, interference.value, length, depth)
                    ids = [f"{cell}-{n.family}-{entity_index(needles, n)}" for n in needles]
                    for i, (needle, piece) in enumerate(zip(needles, pieces, strict=True)):
                        rng = random.Random(f"{vg.seed}/{ids[i]}")
                        hay = fill(material.stream(interference, rng), length - piece.tokens, tokenizer)
                        at, share = insertion_point(hay, depth)
                        segments = (*hay[:at], piece, *hay[at:])
                        out.candidates.append(
                            Candidate(
                                id=ids[i],
                                segments=segments,
                                length=sum(s.tokens for s in segments),
                                bin=length,
                                depth=depth,
                                realised_depth=share,
                                needle_segment=at,
                                interference=interference.value,
                            )
                        )
                        query_id = f"q-{ids[i]}"
                        out.queries.append(
                            Query(
                                id=query_id,
                                text=needle.query,
                                subset=subset(modality),
                                breakdown=f"{modality}-needle/{interference.value}",
                                bin=length,
                                depth=depth,
                                needle_modality=modality,
                                interference=interference.value,
                                family=needle.family,
                                entity=needle.entity,
                            )
                        )
                        out.pools.append(Pool(query=query_id, candidates=tuple(ids)))
                        out.qrels.append(Qrel(query=query_id, candidate=ids[i], relevance=1))
            log.info(
                "%s needles, %s interference: %d candidates so far",
                modality,
                interference,
                len(out.candidates),
            )
    return out
