"""Haystack material: the bundled prose and generated pictures, or interleaved documents a user has.

Accepted user formats (JSONL, one document a line, image paths relative to the file and confined to its
folder, as MileBench's images are to their task's):
- OBELICS (its published rows, ``metadata`` and ``general_metadata`` ignored): ``{"texts": [str | null,
  ...], "images": [url | path | null, ...], ...}``, the two lists aligned, exactly one of each pair set;
  OBELICS names images by URL, so the downloaded ones are found through an image map (JSONL ``{"url",
  "path"}``, paths relative to the map) and a URL the map lacks (a dead link) is left out;
- MM-NIAH-style: ``{"context": "text <image> text ...", "images_list": [path, ...]}``, one path per
  ``<image>``.
Text is split into sentences so a needle can go near any depth. Each candidate draws its haystack as a
stream from a random starting point; the interference variant keeps text only, images only, or both.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.mmlongembed.corpus import bundled_sentences, split_sentences
from milebench.benchmarks.mmlongembed.images import copy_image, haystack_image, save_png
from milebench.benchmarks.mmlongembed.lengths import count_texts
from milebench.benchmarks.mmlongembed.records import ImageSegment, TextSegment
from milebench.benchmarks.mmlongembed.sources.common import read_jsonl
from milebench.benchmarks.mmlongembed.spec import BundledHaystack, FileHaystack, HaystackSource, Modality
from milebench.benchmarks.mmlongembed.task_inputs import inside
from milebench.benchmarks.mmlongembed.task_spec import under
from milebench.preprocess.tokenizer import HFTokenizer
from milebench.record_files import RecordError

MMNIAH_IMAGE = "<image>"
BUNDLED_IMAGES = 24
MIXED_SENTENCES = 3
"""Bundled mixed haystacks: an image after every this many sentences."""

Piece = TextSegment | ImageSegment


@dataclass(frozen=True)
class Material:
    documents: tuple[tuple[Piece, ...], ...]
    """Bundled: one document, the prose's sentences interleaved with the pictures."""

    def stream(self, interference: Modality, rng: random.Random) -> Iterator[Piece]:
        """An endless haystack from a random document and position, of the variant's modality."""
        keep = {Modality.TEXT: (TextSegment,), Modality.IMAGE: (ImageSegment,)}.get(
            interference, (TextSegment, ImageSegment)
        )
        flat = [p for doc in self.documents for p in doc if isinstance(p, keep)]
        if not flat:
            raise RecordError(f"haystack material has no {interference.value} segments")
        start = rng.randrange(len(flat))
        return itertools.islice(itertools.cycle(flat), start, None)


def _texts(tokenizer: HFTokenizer, texts: Sequence[str]) -> list[TextSegment]:
    return [
        TextSegment(kind="text", text=t, tokens=n)
        for t, n in zip(texts, count_texts(tokenizer, texts), strict=True)
    ]


def bundled(tokenizer: HFTokenizer, seed: int, folder: Path) -> Material:
    sentences = _texts(tokenizer, bundled_sentences())
    rng = random.Random(f"{seed}/haystack-images")
    images = [save_png(haystack_image(rng), folder) for _ in range(BUNDLED_IMAGES)]
    pieces: list[Piece] = []
    for i, sentence in enumerate(sentences):
        pieces.append(sentence)
        if (i + 1) % MIXED_SENTENCES == 0:
            pieces.append(images[(i // MIXED_SENTENCES) % len(images)])
    return Material(documents=(tuple(pieces),))


URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def _image(name: object, base: Path, urls: Mapping[str, Path], where: str, field: str) -> Path | None:
    """The file an entry names, confined to ``base`` (a URL: through the image map; None if absent)."""
    if not isinstance(name, str) or not name:
        raise RecordError(f"{where}: {field}: an image path expected")
    if URL.match(name):
        return urls.get(name)
    return inside(base, name, where, field)


def _document(
    row: object, kind: str, base: Path, urls: Mapping[str, Path], where: str
) -> list[tuple[str, str | Path]]:
    """(``text``, str) | (``image``, path) pairs of one user document, in order."""
    if not isinstance(row, dict):
        raise RecordError(f"{where}: not a JSON object")
    pairs: list[tuple[str, str | Path]] = []
    if kind == "obelics":
        texts, images = row.get("texts"), row.get("images")
        if not isinstance(texts, list) or not isinstance(images, list) or len(texts) != len(images):
            raise RecordError(f"{where}: texts, images: two lists of the same length expected")
        for i, (text, image) in enumerate(zip(texts, images, strict=True)):
            if (text is None) == (image is None):
                raise RecordError(f"{where}: item {i}: exactly one of texts[{i}] and images[{i}] must be set")
            if text is not None:
                pairs.append(("text", str(text)))
            elif (path := _image(image, base, urls, where, f"images.{i}")) is not None:
                pairs.append(("image", path))
        return pairs
    context, images = row.get("context"), row.get("images_list")
    if not isinstance(context, str) or not isinstance(images, list):
        raise RecordError(f"{where}: context (text) and images_list (list) expected")
    parts = context.split(MMNIAH_IMAGE)
    if len(parts) - 1 != len(images):
        raise RecordError(f"{where}: {len(parts) - 1} {MMNIAH_IMAGE} placeholders but {len(images)} images")
    pairs.append(("text", parts[0]))
    for i, (image, text) in enumerate(zip(images, parts[1:], strict=True)):
        path = _image(image, base, {}, where, f"images_list.{i}")
        pairs += [*([("image", path)] if path is not None else []), ("text", text)]
    return pairs


def image_map(path: Path) -> dict[str, Path]:
    """URL -> downloaded file, each file confined to the map's folder."""
    out: dict[str, Path] = {}
    for where, raw in read_jsonl(path, "image map"):
        url, name = (raw.get("url"), raw.get("path")) if isinstance(raw, dict) else (None, None)
        if not isinstance(url, str) or not isinstance(name, str):
            raise RecordError(f"{where}: url and path (strings) expected")
        out[url] = inside(path.parent, name, where, "path")
    return out


def from_file(source: FileHaystack, specs_root: Path, tokenizer: HFTokenizer, folder: Path) -> Material:
    """User documents (path relative to the specs folder unless absolute)."""
    path = under(specs_root, source.path)
    urls = image_map(under(specs_root, source.image_map)) if source.image_map is not None else {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise RecordError(f"{path}: haystack documents cannot be read: {err}") from None
    documents = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            row = json.loads(line)
        except ValueError as err:
            raise RecordError(f"{where}: not JSON: {err}") from None
        doc: list[Piece] = []
        for _, value in _document(row, source.kind, path.parent, urls, where):
            if isinstance(value, Path):
                doc.append(copy_image(value, folder, where))
            else:
                doc.extend(_texts(tokenizer, split_sentences(" ".join(value.split()))))
        documents.append(tuple(doc))
    return Material(documents=tuple(documents))


def referenced_files(source: HaystackSource, specs_root: Path) -> list[Path]:
    """The documents, the image map and every picture they name (for a rule's declared inputs); what
    does not read is left out here and reported by ``from_file``."""
    if isinstance(source, BundledHaystack):
        return []
    path = under(specs_root, source.path)
    found = [path]
    try:
        urls = {}
        if source.image_map is not None:
            found.append(under(specs_root, source.image_map))
            urls = image_map(found[-1])
        for where, row in read_jsonl(path, "haystack documents"):
            found += [
                v for _, v in _document(row, source.kind, path.parent, urls, where) if isinstance(v, Path)
            ]
    except RecordError:
        pass
    return list(dict.fromkeys(found))


def load_material(
    source: HaystackSource, specs_root: Path, tokenizer: HFTokenizer, seed: int, folder: Path
) -> Material:
    if isinstance(source, BundledHaystack):
        return bundled(tokenizer, seed, folder)
    return from_file(source, specs_root, tokenizer, folder)
