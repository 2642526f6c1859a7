"""Qwen's tokenizer built offline from the BPE ranks a package ships (the ``dashscope`` wheel's
``resources/qwen.tiktoken``), for counting lengths as the paper does (with Qwen3's tokenizer).

The ranks file is tiktoken's format: one base64 token and its rank per line, 151,643 lines. transformers
turns it into byte-level BPE vocabulary and merges (``TikTokenConverter``) and builds them into its own
``Qwen2Tokenizer``, the class Qwen3's hub tokenizer names: NFC normalisation, Qwen's pre-tokenizer
pattern (letters, single digits, punctuation runs, newline and whitespace runs), byte-level BPE. Ids 0 to
151,642 are the ranks; ``tests/benchmarks/mmlongembed/test_embed_qwen_vocab.py`` holds the result to
tiktoken's ids on the same file and to published Qwen2/Qwen3 ids.

Where Qwen3's hub tokenizer differs: it has added tokens from id 151,643 on (``<|endoftext|>``,
``<|im_start|>``, ``<|im_end|>``, then vision, tool-call, fill-in-the-middle and think markers) that the
ranks file does not hold. Here only ``<|endoftext|>`` is one (at 151,643, as in Qwen3). A text that holds
another marker literally (``<|im_start|>``, ``<think>``) counts as the marker's pieces here and as one
token there; plain text counts the same.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from milebench.preprocess.tokenizer import HFTokenizer, TokenizerError

QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
"""Qwen's pre-tokenizer pattern (its tokenizer.json, and transformers' ``Qwen2Tokenizer``)."""


def package_file(package: str, file: str) -> Path:
    """A file inside an installed package, found without importing the package (dashscope's import
    pulls in its whole API client)."""
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise TokenizerError(f"package {package!r} is not installed (it ships {file})")
    path = Path(next(iter(found.submodule_search_locations))) / file
    if not path.is_file():
        raise TokenizerError(f"package {package!r} has no {file}")
    return path


def checked(path: Path, sha256: str | None) -> Path:
    if sha256 is not None:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != sha256:
            raise TokenizerError(f"{path}: sha256 {digest}, the spec pins {sha256}")
    return path


def load_qwen_vocabulary(package: str, file: str, sha256: str | None = None) -> HFTokenizer:
    """Qwen's tokenizer from the ranks file ``file`` of ``package``, its sha256 checked when given."""
    from transformers import Qwen2Tokenizer
    from transformers.convert_slow_tokenizer import TikTokenConverter

    path = checked(package_file(package, file), sha256)
    try:
        vocab, merges = TikTokenConverter(
            vocab_file=str(path), pattern=QWEN_PATTERN
        ).extract_vocab_merges_from_model(str(path))
    except (OSError, ValueError) as err:
        raise TokenizerError(f"{path}: not a tiktoken ranks file: {err}") from None
    return HFTokenizer(Qwen2Tokenizer(vocab=vocab, merges=merges), f"{package}/{file}")
