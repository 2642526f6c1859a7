"""The official answer normalisation (``Eval.process``), quirks included, since every score depends on it.

The evaluator applies it to gold answers, predictions and options alike. Two quirks are deliberate here:
whether a punctuation mark is deleted or turned into a space is decided on the whole text (the mark next
to a space, or any digit-comma-digit anywhere), and at most 32 periods are deleted because the official
call passes ``re.UNICODE`` (whose integer value is 32) in the ``count`` position of ``re.sub``.
"""

from __future__ import annotations

import re

PUNCTUATION: tuple[str, ...] = (
    ";",
    "/",
    "[",
    "]",
    '"',
    "{",
    "}",
    "(",
    ")",
    "=",
    "+",
    "\\",
    "_",
    "-",
    ">",
    "<",
    "@",
    "`",
    ",",
    "?",
    "!",
)
"""The evaluator's punctuation list, in its order (the order matters: each mark is handled in turn)."""

PERIOD_REMOVAL_LIMIT = 32
"""``int(re.UNICODE)``: the official ``periodStrip.sub("", text, re.UNICODE)`` passes it as ``count``."""

_DIGIT_COMMA_DIGIT = re.compile(r"\d,\d")
# The official pattern "(?!<=\d)(\.)(?!\d)" opens with a lookahead for the text "<=digit", which can never
# match where a period stands, so it reduces to: a period not followed by a (Unicode) digit.
_PERIOD = re.compile(r"\.(?!\d)")


def strip_punctuation(text: str) -> str:
    """Delete or space out each punctuation mark, then delete up to 32 periods not followed by a digit."""
    delete_all = _DIGIT_COMMA_DIGIT.search(text) is not None
    out = text
    for mark in PUNCTUATION:
        if delete_all or f"{mark} " in text or f" {mark}" in text:
            out = out.replace(mark, "")
        else:
            out = out.replace(mark, " ")
    return _PERIOD.sub("", out, count=PERIOD_REMOVAL_LIMIT)


def normalize(text: str) -> str:
    """``Eval.process``: whitespace, punctuation, end quotes, lower case."""
    text = text.replace("\n", " ").replace("\t", " ").strip()
    text = strip_punctuation(text)
    return text.strip("'").strip('"').strip().lower()
