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
