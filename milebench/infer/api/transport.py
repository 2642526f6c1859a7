"""One JSON POST under two bounds a broken or hostile server cannot stretch: a deadline for the whole
request (``milebench.http_deadline``) and a cap on the answer's size. Redirects are not followed, so the
key's header only ever goes to the configured URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import requests

from milebench.http_deadline import Deadline

CHUNK_BYTES = 2**16


class DeadlinePassed(Exception):
    """The request was cut at its deadline."""


class TooLarge(Exception):
    """The answer's body is longer than the cap."""


class Answer(NamedTuple):
    status: int
    headers: Mapping[str, str]
    body: bytes


def read_capped(response: requests.Response, limit: int) -> bytes:
    body = bytearray()
    for chunk in response.iter_content(CHUNK_BYTES):
        body += chunk
        if len(body) > limit:
            raise TooLarge(f"answer larger than {limit} bytes")
    return bytes(body)


def post_json(
    session: requests.Session,
    url: str,
    headers: Mapping[str, str],
    body: Any,
    timeout_s: float,
    max_bytes: int,
) -> Answer:
    """The answer to one POST; raises ``DeadlinePassed``, ``TooLarge`` or ``requests``' own errors."""
    with Deadline(timeout_s) as deadline:
        try:
            with session.post(
                url, json=body, headers=headers, timeout=timeout_s, stream=True, allow_redirects=False
            ) as response:
                return Answer(response.status_code, response.headers, read_capped(response, max_bytes))
        except requests.RequestException:
            if deadline.expired:
                raise DeadlinePassed(f"no complete answer within {timeout_s} s") from None
            raise
