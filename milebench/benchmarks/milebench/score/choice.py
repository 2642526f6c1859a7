"""Multiple-choice extraction as the official ``match_choice`` does it, including its lossy paths.

The official rules are reproduced on purpose, not fixed: a two-letter key found with its option text is
cut to its first letter, an option whose normalised text keeps a regex metacharacter is found but never
mapped to its key, and the last resort concatenates every letter of the answer that is a key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from milebench.benchmarks.milebench.score.normalize import normalize

EMPTY_PREDICTION_KEY = "C"
"""What the evaluator extracts from an empty (normalised) prediction."""

_REGEX_SPECIAL = frozenset("\\.^$*+?{}[]|()")
"""The characters the evaluator escapes; others (``-``, ``#``, spaces) pass through unescaped."""


def option_key(index: int) -> str:
    """Key of the option at ``index``: A..Z, then AA..AZ, then ``B`` + chr(65 + index - 52).

    Past index 77 the official formula leaves the alphabet (``B[``, ``B\\``, ..., ``Ba``); kept as is.
    """
    if index < 26:
        return chr(65 + index)
    if index < 52:
        return "A" + chr(65 + index - 26)
    return "B" + chr(65 + index - 52)


def option_map(choices: Sequence[str]) -> dict[str, str]:
    """Key -> normalised option text, in list order (the evaluator normalises options once here)."""
    return dict(_option_items(tuple(choices)))


@lru_cache(maxsize=4096)
def _option_items(choices: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Cached per choice list: GPR1200's long lists would otherwise be re-normalised for every sample."""
    return tuple((option_key(i), normalize(choice)) for i, choice in enumerate(choices))


def escape_option(text: str) -> str:
    """The evaluator's partial regex escape of a (re-normalised) option text."""
    return "".join("\\" + c if c in _REGEX_SPECIAL else c for c in text)


def _pattern(text: str) -> str:
    return escape_option(normalize(text))


@lru_cache(maxsize=4096)
def _patterns(
    options: tuple[tuple[str, str], ...],
) -> tuple[re.Pattern[str], re.Pattern[str], tuple[str, ...]]:
    """The two searches of the evaluator for one option set, compiled once: "<key> <option>" and bare text."""
    labelled = "|".join(_pattern(f"{key} {text}") for key, text in options)
    bare = tuple(_pattern(text).replace(" ", "") for _, text in options)
    return re.compile(f"({labelled})", re.S), re.compile(f"({'|'.join(bare)})", re.S), bare


def extract_choice(prediction: str, options: Mapping[str, str]) -> str:
    """The key the evaluator reads from a normalised prediction, given key -> normalised option text."""
    if prediction == "":
        return EMPTY_PREDICTION_KEY

    labelled, bare_pattern, bare = _patterns(tuple(options.items()))
    found = labelled.search(prediction)
    if found:
        return found.group(0)[0].upper()

    found = bare_pattern.search(prediction.replace(" ", ""))
    if found:
        matched = found.group(0).strip()
        for key, escaped in zip(options, bare, strict=True):
            if matched == escaped:
                return key.upper()

    if len(prediction) in (1, 2) and prediction.upper() in options:
        return prediction.upper()
    return "".join(c.upper() for c in prediction if c.upper() in options)
