"""Input ids the way LLaVA's ``tokenizer_image_token`` builds them: the text is split at the image token,
each chunk is tokenized on its own (special tokens included), and image ids join the chunks.

When the first chunk starts with BOS, that BOS is kept once and every later chunk loses its first id
(its own BOS). Tokenizing chunk by chunk can differ from tokenizing the whole string: a SentencePiece
tokenizer adds its word-start marker at the start of every chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def per_chunk_ids(
    text: str, tokenizer: Any, image_token: str, image_ids: Sequence[int], *, special_tokens: bool = True
) -> list[int]:
    """Ids of ``text`` with ``image_ids`` in place of each ``image_token``; ``special_tokens``: whether
    each chunk gets the tokenizer's special tokens (LLaVA's function: yes; ALLaVA's copy of it: no)."""
    chunks = [
        list(tokenizer(chunk, add_special_tokens=special_tokens).input_ids)
        for chunk in text.split(image_token)
    ]
    first = chunks[0]
    skip = 1 if first and first[0] == tokenizer.bos_token_id else 0
    ids = list(first)
    for chunk in chunks[1:]:
        ids += [*image_ids, *chunk[skip:]]
    return ids
