"""The one error family of the data fetch, so the CLI can report every refusal the same way."""

from __future__ import annotations

from milebench.errors import KitError


class FetchError(KitError, RuntimeError):
    """Data could not be fetched, verified or extracted; the message names the archive and the cause."""
