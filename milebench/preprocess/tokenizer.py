"""Token counting for truncation: the model's own tokenizer behind a small protocol.

The official code counts with ``tokenizer(text, add_special_tokens=False).input_ids`` and rebuilds kept
text with ``tokenizer.decode(ids)``; :class:`HFTokenizer` does exactly that. ``offsets`` serves the
``clean`` mode, which cuts the original string instead of decoding.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from milebench.errors import KitError

if TYPE_CHECKING:  # transformers costs seconds to import; only jobs that count tokens pay for it
    from transformers import PreTrainedTokenizerBase


log = logging.getLogger(__name__)


class TokenizerError(KitError, ValueError):
    """A tokenizer that cannot be loaded or cannot do what a truncation mode needs."""


class Tokenizer(Protocol):
    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids, as the official code rebuilds it."""
        ...

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span in ``text`` of each token of ``encode([text])[0]``."""
        ...


class HFTokenizer:
    """A ``transformers`` tokenizer used the way the official ``MileBenchDataset`` uses it."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, name: str) -> None:
        self.tokenizer = tokenizer
        self.name = name

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        if not texts:
            return []
        return list(self.tokenizer(list(texts), add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        # transformers types decode for a batch too (str | list[str]); one id sequence gives one str
        return self.tokenizer.decode(list(ids))  # type: ignore[return-value]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        if not self.tokenizer.is_fast:
            raise TokenizerError(f"tokenizer {self.name}: clean truncation needs a fast tokenizer (offsets)")
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [tuple(span) for span in encoded["offset_mapping"]]


def load_tokenizer(
    source: str | Path, revision: str | None = None, trust_remote_code: bool = False
) -> HFTokenizer:
    """Load from a local model folder or a hub id (the hub's cache applies; offline mode is honoured).

    ``trust_remote_code`` runs the repository's own tokenizer code (Qwen-VL-Chat ships one), as its
    model spec allows with ``weights.trust_remote_code: true``; from the hub without a pinned revision
    that code can change under the run, so it is loaded with a warning.
    """
    if trust_remote_code and revision is None and not Path(source).is_dir():
        log.warning(
            "tokenizer %s runs the repository's own code at its current main: pin its revision in "
            "specs/locks/weights.lock.yaml (milebench lock-weights) so the counting code cannot change",
            source,
        )
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(
            str(source), revision=revision, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError) as err:
        raise TokenizerError(f"cannot load tokenizer {source}: {err}") from None
    return HFTokenizer(tokenizer, str(source))
