"""Safe, idempotent extraction of a verified archive into the data folder.

Every member is checked before anything is written, so a hostile or broken archive leaves no trace;
the archive is unpacked into a temporary folder beside the tree and moved into place, and a marker keyed
by the archive's sha256 is written last, so an interrupted extraction is simply redone.
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from milebench.data.errors import FetchError
from milebench.io import atomic_write_json

log = logging.getLogger(__name__)

TOP = "MileBench"
MARKERS = ".extracted"
SHOWN_PROBLEMS = 10


class UnsafeArchiveError(FetchError):
    """An archive member would land outside the target or is not a plain file, folder or inner link."""


def marker_path(data_dir: Path, name: str, sha256: str) -> Path:
    return data_dir / MARKERS / f"{name}.{sha256}.json"


def is_extracted(data_dir: Path, name: str, sha256: str) -> bool:
    """True when this exact archive was extracted into a tree that is still there."""
    top = data_dir / TOP
    return marker_path(data_dir, name, sha256).is_file() and top.is_dir() and not top.is_symlink()


def _inside(relative: str) -> bool:
    path = posixpath.normpath(relative)
    return not (posixpath.isabs(path) or path == ".." or path.startswith("../"))


def member_problem(member: tarfile.TarInfo) -> str | None:
    """Why ``member`` may not be extracted, or None when it is safe."""
    if posixpath.isabs(member.name):
        return "absolute path"
    if not _inside(member.name):
        return "path escapes the target folder"
    if member.issym():
        target = posixpath.join(posixpath.dirname(member.name), member.linkname)
        if posixpath.isabs(member.linkname) or not _inside(target):
            return f"symlink to {member.linkname!r} points outside the target folder"
    if member.islnk() and (posixpath.isabs(member.linkname) or not _inside(member.linkname)):
        return f"hardlink to {member.linkname!r} points outside the target folder"
    if member.isdev():
        return "device or fifo"
    return None


def check_archive(tar: tarfile.TarFile, archive: Path) -> None:
    """Scan every member; refuse the whole archive if any one is unsafe or nothing is under MileBench/."""
    members = tar.getmembers()
    problems = [f"{m.name}: {why}" for m in members if (why := member_problem(m))]
    if problems:
        shown = "\n  ".join(problems[:SHOWN_PROBLEMS])
        more = f"\n  ... and {len(problems) - SHOWN_PROBLEMS} more" if len(problems) > SHOWN_PROBLEMS else ""
        raise UnsafeArchiveError(f"refusing to extract {archive}; unsafe members:\n  {shown}{more}")
    if not any(posixpath.normpath(m.name).split("/")[0] == TOP for m in members):
        raise UnsafeArchiveError(f"refusing to extract {archive}: no member under {TOP}/")


def extract_archive(archive: Path, name: str, sha256: str, data_dir: Path) -> bool:
    """Extract ``archive`` into ``data_dir`` (giving ``data_dir/MileBench``); False when already done."""
    if is_extracted(data_dir, name, sha256):
        log.info("%s already extracted", name)
        return False
    data_dir.mkdir(parents=True, exist_ok=True)
    for stale in data_dir.glob(f".extract-{name}-*"):
        shutil.rmtree(stale)
    try:
        with tarfile.open(archive, "r:*") as tar:
            check_archive(tar, archive)
            _unpack_into(tar, name, data_dir)
    except tarfile.FilterError as err:
        raise UnsafeArchiveError(f"refusing to extract {archive}: {err}") from err
    except tarfile.TarError as err:
        raise FetchError(f"cannot read archive {archive}: {err}") from err
    atomic_write_json(
        marker_path(data_dir, name, sha256),
        {"archive": name, "sha256": sha256, "extracted_at": datetime.now(UTC).isoformat()},
    )
    return True


def _unpack_into(tar: tarfile.TarFile, name: str, data_dir: Path) -> None:
    """Unpack into a temporary folder beside the tree, then move ``MileBench/`` into place."""
    tmp = Path(tempfile.mkdtemp(prefix=f".extract-{name}-", dir=data_dir))
    try:
        log.info("extracting %s", name)
        tar.extractall(tmp, filter="data")
        ignored = sorted(p.name for p in tmp.iterdir() if p.name != TOP)
        if ignored:
            log.warning("%s: ignoring entries outside %s/: %s", name, TOP, ", ".join(ignored))
        _merge(tmp / TOP, data_dir / TOP)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _merge(src: Path, dst: Path) -> None:
    """Move ``src`` to ``dst``; folders already there are merged, other entries replaced."""
    if not os.path.lexists(dst):
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
        return
    if _real_dir(src) and _real_dir(dst):
        for child in src.iterdir():
            _merge(child, dst / child.name)
        return
    if _real_dir(dst):
        shutil.rmtree(dst)
    else:
        dst.unlink()
    os.replace(src, dst)


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()
