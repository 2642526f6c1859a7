"""Files the kit ships inside its package (default specs, report templates, the tiler's font).

They are found through ``importlib.resources``, never through the layout of a source checkout, so an
installed wheel finds them exactly as a checkout does; ``pyproject.toml`` declares them as package data.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from milebench.errors import KitError


def package_path(package: str, *parts: str) -> Path:
    """A folder or file shipped inside ``package``, as a path on disk.

    The kit reads these with file APIs (globbing spec folders, Jinja's file loader, FreeType), so the
    package must be installed as files, which pip always does; a zipped package is refused by name."""
    resource = files(package).joinpath(*parts)
    if not isinstance(resource, Path):
        raise KitError(f"{package}: installed inside an archive ({resource}); install the kit with pip")
    return resource
