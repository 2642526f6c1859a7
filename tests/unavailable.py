"""What a test does when a real service it needs is missing: skip where no setup script ran, fail in CI
(``CI`` set, where ``.ci/run`` ran the setup scripts), so a broken setup cannot pass as skipped tests."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    """Skip with the reason; fail with it when the environment variable CI is set."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)
