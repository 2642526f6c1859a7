"""The kit's expected failures: bad input, a missing stage input, a refused archive, a busy cell.

Their messages are complete (they name the file and the field, sample or command that helps), so the
``milebench`` command prints them as one error and exits with their ``exit_status``, never with a
traceback. Any other exception is a bug in the kit and keeps its traceback.
"""

from __future__ import annotations

from typing import ClassVar


class KitError(Exception):
    """An expected failure whose message says all a user needs to act on it."""

    exit_status: ClassVar[int] = 1
    """The command's exit status; 2 where a file the user hands the command is refused as given, as a bad
    spec or option is."""
