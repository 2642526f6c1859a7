"""Safe, idempotent extraction of a verified archive into the data folder.

MileBench archives hold folders and regular files only, so that is all this accepts. Every member is
checked before anything is written: its type (no symlink, hardlink, device or fifo), where its name
resolves against the real target folder, that no name is used twice, and the total size the members
declare (against a cap, as the headers are read, and the free disk space). The members are then
written by this module, not by ``tarfile``'s extraction filters, whose checks depend on the
interpreter's patch level. The archive is unpacked into a temporary folder in the markers folder beside the
tree (the fetch job's own output) and moved into place, and a marker keyed by the archive's sha256 is
written last, so an interrupted extraction is simply redone.
"""

from __future__ import annotations

import gzip
import logging
import os
import posixpath
import shutil
import tarfile
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from milebench.benchmarks.milebench.paths import EXTRACT_MARKERS
from milebench.data.errors import FetchError
from milebench.io import atomic_write_json, destination

log = logging.getLogger(__name__)

TOP = "MileBench"
MARKERS = EXTRACT_MARKERS
SHOWN_PROBLEMS = 10
COPY_CHUNK = 1 << 20
READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile)


class RefusedArchiveError(FetchError):
    """The archive itself is refused (unsafe, unreadable or too large), so fetch quarantines it."""


class UnsafeArchiveError(RefusedArchiveError):
    """A member is not a folder or regular file inside the target, or the members are too large."""


@dataclass(frozen=True)
class ExtractLimits:
    """How far one archive may expand, and how much disk must stay free after extracting it.

    The cap is ``max_ratio`` times the archive's size, and never below ``min_cap_bytes`` (so small archives
    of well-compressed text pass); MileBench archives are mostly JPEG images and expand about 1:1.
    """

    max_ratio: float = 20.0
    min_cap_bytes: int = 1 << 30
    keep_free_bytes: int = 256 << 20

    def cap(self, archive_size: int) -> int:
        return max(self.min_cap_bytes, int(self.max_ratio * archive_size))


def marker_path(data_dir: Path, name: str, sha256: str) -> Path:
    return data_dir / MARKERS / f"{name}.{sha256}.json"


def is_extracted(data_dir: Path, name: str, sha256: str) -> bool:
    """True when this exact archive was extracted into a tree that is still there."""
    top = data_dir / TOP
    return marker_path(data_dir, name, sha256).is_file() and top.is_dir() and not top.is_symlink()


def member_problem(member: tarfile.TarInfo, dest: Path | None) -> str | None:
    """Why ``member`` (landing at ``dest``, see ``destination``) may not be extracted, or None."""
    if member.issym():
        return f"symlink to {member.linkname!r}; archives may hold folders and regular files only"
    if member.islnk():
        return f"hardlink to {member.linkname!r}; archives may hold folders and regular files only"
    if member.isdev():
        return "device or fifo; archives may hold folders and regular files only"
    if not (member.isreg() or member.isdir()):
        return f"member type {member.type!r}; archives may hold folders and regular files only"
    if "\0" in member.name:
        return "NUL byte in the name"
    if posixpath.isabs(member.name):
        return "absolute path"
    if dest is None:
        return "path escapes the target folder"
    return None


def name_clashes(members: list[tarfile.TarInfo]) -> list[str]:
    """Files named twice, or named like a folder: the ways one member could replace another's data."""
    files = Counter(posixpath.normpath(m.name) for m in members if m.isreg())
    folders = {TOP} | {posixpath.normpath(m.name) for m in members if m.isdir()}
    folders |= {str(p) for m in members for p in PurePosixPath(posixpath.normpath(m.name)).parents}
    return [
        f"{name}: {'named more than once' if count > 1 else 'both a file and a folder'}"
        for name, count in files.items()
        if count > 1 or name in folders
    ]


Plan = list[tuple[tarfile.TarInfo, Path]]


def check_archive(members: list[tarfile.TarInfo], root: Path, archive: Path) -> Plan:
    """Refuse the whole archive if any member is unsafe.

    Returns the members under ``MileBench/`` with where each lands under ``root``; others are left out.
    """
    plan: Plan = []
    problems: list[str] = []
    ignored: set[str] = set()
    for member in members:
        dest = destination(root, member.name)
        if why := member_problem(member, dest):
            problems.append(f"{member.name}: {why}")
        elif dest is not None and dest != root:
            top = dest.relative_to(root).parts[0]
            if top == TOP:
                plan.append((member, dest))
            else:
                ignored.add(top)
    problems += name_clashes(members)
    if problems:
        shown = "\n  ".join(problems[:SHOWN_PROBLEMS])
        more = f"\n  ... and {len(problems) - SHOWN_PROBLEMS} more" if len(problems) > SHOWN_PROBLEMS else ""
        raise UnsafeArchiveError(f"refusing to extract {archive}; unsafe members:\n  {shown}{more}")
    if not plan:
        raise UnsafeArchiveError(f"refusing to extract {archive}: no member under {TOP}/")
    if ignored:
        log.warning("%s: ignoring entries outside %s/: %s", archive.name, TOP, ", ".join(sorted(ignored)))
    return plan


def extract_archive(
    archive: Path, name: str, sha256: str, data_dir: Path, limits: ExtractLimits = ExtractLimits()
) -> bool:
    """Extract ``archive`` into ``data_dir`` (giving ``data_dir/MileBench``); False when already done."""
    if is_extracted(data_dir, name, sha256):
        log.info("%s already extracted", name)
        return False
    (data_dir / MARKERS).mkdir(parents=True, exist_ok=True)
    for stale in (data_dir / MARKERS).glob(f".extract-{name}-*"):
        shutil.rmtree(stale)
    with _reading(archive), tarfile.open(archive, "r:gz") as tar:
        members = _read_members(tar, archive, limits)
        _read_to_end(tar)
        _unpack_into(tar, members, archive, name, data_dir, limits)
    atomic_write_json(
        marker_path(data_dir, name, sha256),
        {"archive": name, "sha256": sha256, "extracted_at": datetime.now(UTC).isoformat()},
    )
    return True


@contextmanager
def _reading(archive: Path) -> Iterator[None]:
    """Turn the ways a damaged archive fails to decompress or parse into one clear refusal."""
    try:
        yield
    except EOFError as err:
        raise RefusedArchiveError(
            f"cannot read archive {archive}: truncated (the compressed data ends before its end marker)"
        ) from err
    except READ_ERRORS as err:
        raise RefusedArchiveError(f"cannot read archive {archive}: corrupt or truncated ({err})") from err


def _read_members(tar: tarfile.TarFile, archive: Path, limits: ExtractLimits) -> list[tarfile.TarInfo]:
    """All members, refused as soon as the sizes their headers declare pass the cap.

    A header comes before its data, so the data past the cap is never decompressed.
    """
    size = archive.stat().st_size
    cap = limits.cap(size)
    members: list[tarfile.TarInfo] = []
    total = 0
    for member in tar:
        members.append(member)
        total += member.size if member.isreg() else 0
        if total > cap:
            raise UnsafeArchiveError(
                f"refusing to extract {archive}: its files declare at least {total} bytes, over the cap of "
                f"{cap} bytes ({limits.max_ratio:g} times its {size} bytes, at least {limits.min_cap_bytes})"
            )
    return members


def _read_to_end(tar: tarfile.TarFile) -> None:
    """Read the compressed stream to its end, where gzip checks the data's CRC and length.

    ``tarfile`` stops reading at the archive's end marker, before them, so damage inside file data
    would otherwise pass unnoticed.
    """
    while tar.fileobj.read(COPY_CHUNK):
        pass


def _unpack_into(
    tar: tarfile.TarFile,
    members: list[tarfile.TarInfo],
    archive: Path,
    name: str,
    data_dir: Path,
    limits: ExtractLimits,
) -> None:
    """Check, unpack into a temporary folder in the markers folder, then move ``MileBench/`` into place."""
    tmp = Path(tempfile.mkdtemp(prefix=f".extract-{name}-", dir=data_dir / MARKERS)).resolve()
    try:
        plan = check_archive(members, tmp, archive)
        total = sum(m.size for m, _ in plan if m.isreg())
        _check_free_space(archive, data_dir, total, limits)
        log.info("extracting %s (%d bytes)", name, total)
        try:
            _write(tar, plan)
        except READ_ERRORS:
            raise
        except OSError as err:
            raise FetchError(f"cannot extract {archive} into {data_dir}: {err}") from err
        _merge(tmp / TOP, data_dir / TOP)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check_free_space(archive: Path, data_dir: Path, total: int, limits: ExtractLimits) -> None:
    free = shutil.disk_usage(data_dir).free
    if free < total + limits.keep_free_bytes:
        raise FetchError(
            f"not enough free space to extract {archive}: its files take {total} bytes and "
            f"{limits.keep_free_bytes} more must stay free, but {data_dir} has {free} bytes free"
        )


def _write(tar: tarfile.TarFile, plan: Plan) -> None:
    """Write the checked folders and files.

    A member's data is exactly its declared size, so what is written is what the cap counted; files are
    created exclusively, so nothing already there (a link included) is ever written through.
    """
    for member, dest in plan:
        if member.isdir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        source = tar.extractfile(member)
        assert source is not None, "a regular file always has data"
        with source, open(dest, "xb") as out:
            shutil.copyfileobj(source, out, COPY_CHUNK)


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
