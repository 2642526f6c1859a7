"""The kit's expected failures: bad input, a missing stage input, a refused archive, a busy cell.

Their messages are complete (they name the file and the field, sample or command that helps), so the
``milebench`` command prints them as one error and exits non-zero, never with a traceback. Any other
exception is a bug in the kit and keeps its traceback.
"""

from __future__ import annotations


class KitError(Exception):
    """An expected failure whose message says all a user needs to act on it."""
