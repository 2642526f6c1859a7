"""A bundle given as its tarball: unpacked to a scratch folder for ``verify``, refusing anything a bundle
never holds.

``milebench archive --tarball`` writes one top folder of plain files and folders. A tarball is untrusted
input (it comes from another machine), so before anything is written every member must be a file or a
folder under that one top folder, named without ``..`` or a leading ``/``: a link, a device or a path that
would land outside the scratch folder is refused by name. The extraction itself also runs under tarfile's
``data`` filter, which refuses the same escapes and drops special permission bits.
"""

from __future__ import annotations

import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from milebench.archive.manifest import BundleError, RefusedBundle


def checked_members(tarball: Path, tar: tarfile.TarFile) -> tuple[str, list[tarfile.TarInfo]]:
    """(top folder, members) of a tarball shaped like a bundle's; a RefusedBundle names the first misfit."""
    members = tar.getmembers()
    tops = {PurePosixPath(m.name).parts[0] for m in members if PurePosixPath(m.name).parts}
    if len(tops) != 1:
        found = ", ".join(sorted(tops)) or "nothing"
        raise RefusedBundle(f"{tarball}: not one bundle folder at the top of the tarball (found {found})")
    for m in members:
        name = PurePosixPath(m.name)
        if name.is_absolute() or ".." in name.parts:
            raise RefusedBundle(f"{tarball}: member {m.name!r} would be written outside the bundle folder")
        if not (m.isfile() or m.isdir()):
            raise RefusedBundle(
                f"{tarball}: member {m.name!r} is not a plain file or folder (a link or device): "
                "a bundle holds none"
            )
    return tops.pop(), members


def extract(tarball: Path, dest: Path) -> str:
    """Unpack ``tarball`` into ``dest``, its members checked first; returns its top folder's name."""
    try:
        with tarfile.open(tarball) as tar:
            top, members = checked_members(tarball, tar)
            tar.extractall(dest, members=members, filter="data")
    except tarfile.TarError as err:
        raise RefusedBundle(f"{tarball}: not a bundle tarball that unpacks: {err}") from None
    except OSError as err:  # the evaluator's side (a full disk, a scratch folder it may not write)
        raise BundleError(f"{tarball}: could not be unpacked: {err}") from None
    return top


@contextmanager
def unpacked(tarball: Path) -> Iterator[Path]:
    """The bundle folder of ``tarball``, unpacked to a scratch folder that is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="milebench-bundle-") as tmp:
        yield Path(tmp) / extract(tarball, Path(tmp))


@contextmanager
def bundle_folder(path: Path) -> Iterator[Path]:
    """``path`` itself when it is a folder, else the folder its tarball unpacks to."""
    if path.is_dir():
        yield path
    else:
        with unpacked(path) as folder:
            yield folder
