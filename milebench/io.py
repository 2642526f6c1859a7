"""Atomic file writes, durable JSONL appends and content hashing shared by every stage."""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class UnreadableText(ValueError):
    """A file that is no regular file, or whose bytes are not UTF-8; ``where`` is ``<file>`` or
    ``line N``, ``problem`` what is wrong there."""

    def __init__(self, path: Path, where: str, problem: str) -> None:
        self.path, self.where, self.problem = Path(path), where, problem
        super().__init__(f"{path}: {where}: {problem}")


FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket"))


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file. A folder, fifo, socket or device of that name is refused from the
    opened descriptor: opened without blocking, so a fifo without a writer cannot hang the reader, and
    checked after opening, so it cannot be swapped in between a check and the read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in FILE_KINDS if test(mode)), "a device")
            raise UnreadableText(path, "<file>", f"not a regular file ({kind})")
        return b"".join(iter(lambda: os.read(fd, CHUNK), b""))
    finally:
        os.close(fd)


def read_utf8(path: Path) -> str:
    """A regular file's text; bytes that are not UTF-8 are named by line and offset (``UnreadableText``)."""
    raw = read_regular(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        bom = raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
        problem = f"not UTF-8 text (byte {raw[err.start]:#04x} at offset {err.start})"
        raise UnreadableText(
            path, f"line {line}", problem + (": UTF-16, by its byte-order mark" if bom else "")
        ) from None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(obj: Any) -> str:
    """Stable JSON for hashing: sorted keys, no whitespace."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder and rename: readers never see a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would make outputs unreadable to others
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def atomic_write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


class JsonlAppender:
    """A JSONL file held open for a job's appends: each ``append`` returns only once its records are
    fsync'd, so a killed job keeps every record whose append returned, without reopening the file per
    record."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held open until close()

    def append(self, rows: Iterable[Any]) -> None:
        self._fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def jsonl_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The complete non-blank lines of a JSONL file, numbered from 1, as bytes (a corrupt line may not
    even be UTF-8); a torn last line (a crash mid-write) is left out, not fatal."""
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                return
            if line.strip():
                yield number, line


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Read complete records; a torn last line (a crash mid-write) is ignored, not fatal."""
    for _, line in jsonl_lines(path):
        yield json.loads(line)


def destination(root: Path, name: str) -> Path | None:
    """Where member ``name`` lands under ``root`` (a resolved folder), or None when outside it."""
    if "\0" in name:
        return None
    dest = Path(os.path.realpath(root / name))
    return dest if dest == root or root in dest.parents else None
