"""Embeddings keyed by the content hash of what the model read, kept in an append-only JSONL journal.

Every unique input is encoded once: a candidate shared by pools, or a rerun after a crash, reuses the
journal. A line that is not an embedding (a torn or stray write) is skipped with a warning and its input
is encoded again.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from milebench.benchmarks.mmlongembed.spec import LINEAGE
from milebench.io import JsonlAppender, canonical_json, jsonl_lines, sha256_text
from milebench.spec.base import Spec, spec_hash

log = logging.getLogger(__name__)


def model_key(spec: Spec) -> str:
    """The hash an embedding is keyed by: the spec less its lineage, which pairs models and changes no
    vector."""
    return spec_hash(spec, exclude=LINEAGE)


def content_key(model_hash: str, text: str) -> str:
    return sha256_text(canonical_json({"model": model_hash, "input": text}))


def _read(path: Path) -> dict[str, np.ndarray]:
    found: dict[str, np.ndarray] = {}
    if not path.exists():
        return found
    for number, line in jsonl_lines(path):
        try:
            row = json.loads(line)
            found[row["key"]] = np.frombuffer(base64.b64decode(row["vector"]), dtype=np.float32)
        except (ValueError, KeyError, TypeError) as err:
            log.warning("%s: line %d is not an embedding (%s); its input is encoded again", path, number, err)
    return found


def cached_embeddings(
    path: Path,
    model_hash: str,
    texts: Sequence[str],
    encode: Callable[[list[str]], np.ndarray],
    batch: int,
) -> dict[str, np.ndarray]:
    """Text -> embedding for every distinct text, encoding only those the journal lacks."""
    known = _read(path)
    keys = {text: content_key(model_hash, text) for text in dict.fromkeys(texts)}
    missing = [text for text, key in keys.items() if key not in known]
    log.info("%d distinct inputs, %d cached, %d to encode", len(keys), len(keys) - len(missing), len(missing))
    with JsonlAppender(path) as journal:
        for start in range(0, len(missing), batch):
            chunk = missing[start : start + batch]
            vectors = np.asarray(encode(chunk), dtype=np.float32)
            rows = []
            for text, vector in zip(chunk, vectors, strict=True):
                known[keys[text]] = vector
                rows.append({"key": keys[text], "vector": base64.b64encode(vector.tobytes()).decode("ascii")})
            journal.append(rows)
    return {text: known[key] for text, key in keys.items()}
