"""Finding an API key in text a provider sent back, in every form an echo of the request can take.

A provider, proxy or gateway may echo the request: the key as is, URL-encoded, inside base64 (of the key
alone, of ``Bearer key``, of a ``user:key`` Basic credential, of anything around it), or cut short by a
length limit. Each of these forms is broken into pieces of ``PIECE`` characters, and text holding any
piece holds (part of) the key. A hostile endpoint may also spell the key out with spaces or punctuation
between its characters, or reversed: its letters and digits alone (``letters``), forwards and backwards,
are broken into pieces too, and found among the letters and digits of the text, whatever stands between.
"""

from __future__ import annotations

import base64
from urllib.parse import quote, quote_plus

PIECE = 8
"""Shortest run of key characters treated as the key: long enough that ordinary text does not match by
chance, short enough that a key cut by a length limit is still caught."""
REDACTED = "[redacted]"
URLSAFE = str.maketrans("+/", "-_")


def base64_cores(secret: bytes) -> set[str]:
    """The base64 characters that encode only ``secret``'s bytes, for each of the three alignments the
    secret can have inside longer encoded data (``user:key``, ``Bearer key``, a whole echoed header)."""
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + secret).decode("ascii")
        head = (offset * 8 + 5) // 6  # characters carrying bits of the bytes before the secret
        whole = (offset + len(secret)) // 3 * 4  # complete groups; a partial one mixes in bytes after
        cores.add(encoded[head:whole])
    return cores


def pieces(forms: set[str], width: int) -> frozenset[str]:
    return frozenset(form[i : i + width] for form in forms for i in range(len(form) - width + 1))


def letters(text: str) -> list[int]:
    """Where the letters and digits of ``text`` are: what is left of a key spelled out with spaces or
    punctuation between its characters."""
    return [i for i, char in enumerate(text) if char.isalnum()]


class Redactor:
    """Finds and replaces ``secret`` in any of its echoed forms; an empty one (a keyless endpoint) is
    never found."""

    def __init__(self, secret: str) -> None:
        forms = {secret, quote(secret, safe=""), quote_plus(secret)}
        for core in base64_cores(secret.encode()):
            forms |= {core, core.translate(URLSAFE)}
        self.width = min(PIECE, len(secret))
        self.pieces = pieces(forms, self.width) if secret else frozenset()
        bare = "".join(secret[i] for i in letters(secret))
        self.spread_width = min(PIECE, len(bare))
        self.spread = pieces({bare, bare[::-1]}, self.spread_width) if bare else frozenset()

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The stretches of ``text`` covered by pieces of the key, as is or spread out, merged, in order."""
        found = [
            (i, i + self.width)
            for i in range(len(text) - self.width + 1)
            if text[i : i + self.width] in self.pieces
        ]
        at, width = letters(text), self.spread_width
        bare = "".join(text[i] for i in at)
        found += [
            (at[j], at[j + width - 1] + 1)
            for j in range(len(bare) - width + 1)
            if bare[j : j + width] in self.spread
        ]
        spans: list[tuple[int, int]] = []
        for start, end in sorted(found):
            if spans and start <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
            else:
                spans.append((start, end))
        return spans

    def found(self, text: str) -> bool:
        return bool(self.spans(text))

    def redact(self, text: str) -> str:
        """``text`` with every stretch holding the key replaced; redact before cutting, so no cut can
        leave part of a key behind."""
        kept, last = [], 0
        for start, end in self.spans(text):
            kept += [text[last:start], REDACTED]
            last = end
        kept.append(text[last:])
        return "".join(kept)
