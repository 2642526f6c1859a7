"""What a failed Hugging Face hub call raises: the hub's own HTTP errors and its HTTP client's.

``huggingface_hub`` raises the errors of whichever HTTP client its release uses (httpx, httpx2 or requests)
for a network that is down; the lock commands turn all of them into one clear message.
"""

from __future__ import annotations

import importlib
from functools import cache


@cache
def hub_errors() -> tuple[type[BaseException], ...]:
    from huggingface_hub.errors import HfHubHTTPError

    errors: list[type[BaseException]] = [HfHubHTTPError, OSError]
    for client, base in (("httpx2", "HTTPError"), ("httpx", "HTTPError"), ("requests", "RequestException")):
        try:
            errors.append(getattr(importlib.import_module(client), base))
        except ImportError:
            continue
    return tuple(errors)


def hub_error_text(err: BaseException) -> str:
    """A failed hub call on one line, named by its kind: ``RepositoryNotFoundError: 401 Client Error...``
    (the hub's messages span lines; a log line should not)."""
    return f"{type(err).__name__}: {' '.join(str(err).split())}"
