"""One tarball of a bundle folder, the same bytes every time it is made from the same folder.

Members are sorted, every time stamp is the epoch, owners are root without names and modes are fixed,
so nothing of the machine or the moment that packed it gets in.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

FILE_MODE = 0o644
DIR_MODE = 0o755


def member(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = DIR_MODE if info.isdir() else FILE_MODE
    return info


def write_tarball(folder: Path, dest: Path) -> Path:
    """``dest`` holding ``folder`` under its own name; written beside and renamed, never half there."""
    paths = sorted(folder.rglob("*"), key=lambda p: p.relative_to(folder).as_posix())
    tmp = dest.with_name(f".{dest.name}.tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(folder, arcname=folder.name, recursive=False, filter=member)
        for path in paths:
            arcname = f"{folder.name}/{path.relative_to(folder).as_posix()}"
            tar.add(path, arcname=arcname, recursive=False, filter=member)
    tmp.replace(dest)
    return dest
