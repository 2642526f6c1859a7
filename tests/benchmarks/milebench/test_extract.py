"""Safe extraction: every unsafe member refuses the whole archive; extraction is atomic and idempotent."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest
from fetch_helpers import link_member, tar_gz

from milebench.benchmarks.milebench.data import extract
from milebench.benchmarks.milebench.data.extract import (
    ExtractLimits,
    RefusedArchiveError,
    UnsafeArchiveError,
    extract_archive,
    marker_path,
)
from milebench.data.errors import FetchError

GOOD = {
    "MileBench/TaskA/TaskA.json": b'{"meta_data": {}, "data": []}',
    "MileBench/TaskA/images/1.jpg": b"jpg",
}


def write_archive(tmp_path: Path, name: str, data: bytes) -> tuple[Path, str]:
    path = tmp_path / name
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def assert_nothing_extracted(data_dir: Path, name: str, sha: str) -> None:
    assert not (data_dir / "MileBench").exists()
    assert not marker_path(data_dir, name, sha).exists()
    assert not list(data_dir.glob("**/.extract-*"))


def test_extracts_tree_and_marker_then_is_a_no_op(tmp_path: Path) -> None:
    archive, sha = write_archive(tmp_path, "p0.tar.gz", tar_gz(GOOD))
    data_dir = tmp_path / "data"
    assert extract_archive(archive, "p0.tar.gz", sha, data_dir) is True
    assert (data_dir / "MileBench/TaskA/images/1.jpg").read_bytes() == b"jpg"
    marker = marker_path(data_dir, "p0.tar.gz", sha)
    stamp = marker.read_text()
    (data_dir / "MileBench/TaskA/images/1.jpg").write_bytes(b"edited")
    assert extract_archive(archive, "p0.tar.gz", sha, data_dir) is False
    assert (data_dir / "MileBench/TaskA/images/1.jpg").read_bytes() == b"edited"
    assert marker.read_text() == stamp
    assert not list(data_dir.glob("**/.extract-*"))


def test_a_different_sha_is_not_covered_by_the_marker(tmp_path: Path) -> None:
    archive, sha = write_archive(tmp_path, "p0.tar.gz", tar_gz(GOOD))
    data_dir = tmp_path / "data"
    extract_archive(archive, "p0.tar.gz", sha, data_dir)
    assert extract_archive(archive, "p0.tar.gz", "0" * 64, data_dir) is True


def test_archives_merge_into_one_tree(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first, sha1 = write_archive(tmp_path, "p0.tar.gz", tar_gz(GOOD))
    second, sha2 = write_archive(
        tmp_path,
        "p1.tar.gz",
        tar_gz({"MileBench/TaskA/images/2.jpg": b"two", "MileBench/TaskB/TaskB.json": b"{}"}),
    )
    extract_archive(first, "p0.tar.gz", sha1, data_dir)
    extract_archive(second, "p1.tar.gz", sha2, data_dir)
    root = data_dir / "MileBench"
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
        "TaskA/TaskA.json",
        "TaskA/images/1.jpg",
        "TaskA/images/2.jpg",
        "TaskB/TaskB.json",
    ]


def _fifo(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.FIFOTYPE
    return info


def _device(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.CHRTYPE
    info.devmajor, info.devminor = 1, 3
    return info


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (lambda outside: tarfile.TarInfo("MileBench/../../escape.txt"), "escapes"),
        (lambda outside: tarfile.TarInfo("../escape.txt"), "escapes"),
        (lambda outside: tarfile.TarInfo(str(outside / "escape.txt")), "absolute"),
        (lambda outside: link_member("MileBench/l", "../../escape.txt", tarfile.SYMTYPE), "symlink"),
        (lambda outside: link_member("MileBench/l", str(outside / "escape.txt"), tarfile.SYMTYPE), "symlink"),
        (lambda outside: link_member("MileBench/h", "../escape.txt", tarfile.LNKTYPE), "hardlink"),
        (
            lambda outside: link_member("MileBench/h", str(outside / "escape.txt"), tarfile.LNKTYPE),
            "hardlink",
        ),
        (lambda outside: link_member("MileBench/TaskA/images/a.jpg", "1.jpg", tarfile.SYMTYPE), "symlink"),
        (
            lambda outside: link_member(
                "MileBench/TaskA/images/a.jpg", "MileBench/TaskA/images/1.jpg", tarfile.LNKTYPE
            ),
            "hardlink",
        ),
        (lambda outside: _fifo("MileBench/pipe"), "device or fifo"),
        (lambda outside: _device("MileBench/null"), "device or fifo"),
    ],
    ids=[
        "dotdot-inside-prefix",
        "dotdot",
        "absolute",
        "symlink",
        "symlink-abs",
        "hardlink",
        "hardlink-abs",
        "inner-symlink",
        "inner-hardlink",
        "fifo",
        "chr",
    ],
)
def test_unsafe_member_refuses_whole_archive(tmp_path: Path, member, reason: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    bad = member(outside)
    archive, sha = write_archive(tmp_path, "p0.tar.gz", tar_gz(GOOD, [bad]))
    data_dir = tmp_path / "work" / "data"
    with pytest.raises(UnsafeArchiveError, match=reason) as err:
        extract_archive(archive, "p0.tar.gz", sha, data_dir)
    assert bad.name in str(err.value) and str(archive) in str(err.value)
    assert_nothing_extracted(data_dir, "p0.tar.gz", sha)
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "work" / "escape.txt").exists()


def test_archive_without_milebench_folder_is_refused(tmp_path: Path) -> None:
    archive, sha = write_archive(tmp_path, "p0.tar.gz", tar_gz({"Other/x.json": b"{}"}))
    data_dir = tmp_path / "data"
    with pytest.raises(UnsafeArchiveError, match="no member under MileBench/"):
        extract_archive(archive, "p0.tar.gz", sha, data_dir)
    assert_nothing_extracted(data_dir, "p0.tar.gz", sha)


def test_entries_outside_milebench_are_not_moved_into_place(tmp_path: Path) -> None:
    archive, sha = write_archive(tmp_path, "p0.tar.gz", tar_gz({**GOOD, "README.txt": b"hi"}))
    data_dir = tmp_path / "data"
    extract_archive(archive, "p0.tar.gz", sha, data_dir)
    assert sorted(p.name for p in data_dir.iterdir()) == [".extracted", "MileBench"]


def test_interrupted_extraction_leaves_no_marker_and_is_redone(tmp_path: Path, monkeypatch) -> None:
    archive, sha = write_archive(tmp_path, "p0.tar.gz", tar_gz(GOOD))
    data_dir = tmp_path / "data"

    def crash(src: Path, dst: Path) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(extract, "_merge", crash)
        with pytest.raises(OSError, match="disk full"):
            extract_archive(archive, "p0.tar.gz", sha, data_dir)
    assert_nothing_extracted(data_dir, "p0.tar.gz", sha)
    (data_dir / extract.MARKERS / ".extract-p0.tar.gz-stale").mkdir(parents=True)
    assert extract_archive(archive, "p0.tar.gz", sha, data_dir) is True
    assert (data_dir / "MileBench/TaskA/TaskA.json").is_file()
    assert not list(data_dir.glob("**/.extract-*"))


def test_corrupt_gzip_is_a_clear_error(tmp_path: Path) -> None:
    archive, sha = write_archive(tmp_path, "p0.tar.gz", b"not a tar archive")
    data_dir = tmp_path / "data"
    with pytest.raises(FetchError, match="cannot read archive"):
        extract_archive(archive, "p0.tar.gz", sha, data_dir)
    assert_nothing_extracted(data_dir, "p0.tar.gz", sha)


STEPS = "abcdefghijklmnop"


def path_max_escape(data_dir: Path, name: str) -> bytes:
    """An archive whose symlinks resolve within PATH_MAX only lexically (CVE-2025-4517).

    Folders of long names are chained by one-letter symlinks, so the last link's real path is longer
    than PATH_MAX: ``os.path.realpath`` stops expanding there and a check built on it sees
    ``MileBench/escape`` inside the target, while the kernel resolves it to the folder above
    ``data_dir``, where ``MileBench/escape/escaped.txt`` lands.
    """
    target = f"{data_dir}/.extract-{name}-xxxxxxxx/MileBench"
    component = "d" * ((os.pathconf("/", "PC_PATH_MAX") - len(target) - 2) // (len(STEPS) + 1))
    members, path = [], "MileBench"
    for step in STEPS:
        folder = tarfile.TarInfo(f"{path}/{component}")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        members += [folder, link_member(f"{path}/{step}", component, tarfile.SYMTYPE)]
        path = f"{path}/{component}"
    long_link = "/".join(STEPS) + "/" + "l" * 254
    members.append(link_member(f"MileBench/{long_link}", "/".join([".."] * len(STEPS)), tarfile.SYMTYPE))
    members.append(link_member("MileBench/escape", f"{long_link}/../../..", tarfile.SYMTYPE))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for member in members:
            tar.addfile(member)
        escaped = tarfile.TarInfo("MileBench/escape/escaped.txt")
        escaped.size = 7
        tar.addfile(escaped, io.BytesIO(b"escaped"))
    return buffer.getvalue()


def test_path_max_symlink_chain_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    work = tmp_path / "work"
    data_dir = work / "data"
    archive, sha = write_archive(tmp_path, "p0.tar.gz", path_max_escape(data_dir, "p0.tar.gz"))
    with pytest.raises(UnsafeArchiveError, match="symlink") as err:
        extract_archive(archive, "p0.tar.gz", sha, data_dir)
    assert str(archive) in str(err.value) and "MileBench/a: symlink to" in str(err.value)
    assert_nothing_extracted(data_dir, "p0.tar.gz", sha)
    assert not (work / "escaped.txt").exists()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "p0.tar.gz",
        "work",
        "work/data",
        "work/data/.extracted",  # the markers folder, empty: scratch space of the extraction
    ]


def _gzip_cut(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _gzip_flipped(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 16]) + data[middle + 16 :]


@pytest.mark.parametrize(
    ("damage", "what"), [(_gzip_cut, "truncated"), (_gzip_flipped, "corrupt")], ids=["cut", "flipped"]
)
def test_damaged_gzip_is_refused_with_a_clear_error(tmp_path: Path, damage, what: str) -> None:
    files = {f"MileBench/TaskA/images/{i}.jpg": os.urandom(20_000) for i in range(8)}
    archive, sha = write_archive(tmp_path, "p0.tar.gz", damage(tar_gz(files)))
    data_dir = tmp_path / "data"
    with pytest.raises(RefusedArchiveError, match=f"cannot read archive {archive}: .*{what}"):
        extract_archive(archive, "p0.tar.gz", sha, data_dir)
    assert_nothing_extracted(data_dir, "p0.tar.gz", sha)


def bomb(size: int) -> bytes:
    """A gzip'd tar whose one big file of zeros compresses about a thousandfold."""
    return tar_gz({**GOOD, "MileBench/TaskA/images/big.bin": bytes(size)})


def test_expansion_past_the_cap_is_refused_before_writing(tmp_path: Path) -> None:
    data = bomb(8 << 20)
    archive, sha = write_archive(tmp_path, "p0.tar.gz", data)
    data_dir = tmp_path / "data"
    limits = ExtractLimits(max_ratio=100, min_cap_bytes=0)
    with pytest.raises(UnsafeArchiveError, match="over the cap") as err:
        extract_archive(archive, "p0.tar.gz", sha, data_dir, limits)
    assert str(archive) in str(err.value) and str(100 * len(data)) in str(err.value)
    assert_nothing_extracted(data_dir, "p0.tar.gz", sha)
    assert extract_archive(archive, "p0.tar.gz", sha, data_dir, ExtractLimits(max_ratio=100_000)) is True


def test_default_cap_admits_small_archives_of_text_and_scales_with_size() -> None:
    limits = ExtractLimits()
    assert limits.cap(1000) == limits.min_cap_bytes > 1000 * limits.max_ratio
    assert limits.cap(10 << 30) == int((10 << 30) * limits.max_ratio)


def test_not_enough_free_space_is_an_error_that_does_not_blame_the_archive(tmp_path: Path) -> None:
    archive, sha = write_archive(tmp_path, "p0.tar.gz", tar_gz(GOOD))
    data_dir = tmp_path / "data"
    with pytest.raises(FetchError, match="not enough free space") as err:
        extract_archive(archive, "p0.tar.gz", sha, data_dir, ExtractLimits(keep_free_bytes=1 << 62))
    assert not isinstance(err.value, RefusedArchiveError)
    assert str(archive) in str(err.value)
    assert_nothing_extracted(data_dir, "p0.tar.gz", sha)


@pytest.mark.parametrize(
    ("files", "folders", "clash"),
    [
        (
            [("MileBench/TaskA/TaskA.json", b"{}"), ("MileBench/TaskA/TaskA.json", b"[]")],
            [],
            "more than once",
        ),
        ([("MileBench/TaskA/x", b"file")], ["MileBench/TaskA/x"], "both a file and a folder"),
        ([("MileBench", b"file")], [], "both a file and a folder"),
    ],
    ids=["same-file-twice", "file-and-folder", "top-is-a-file"],
)
def test_one_name_used_twice_is_refused(tmp_path: Path, files, folders, clash: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in [*GOOD.items(), *files]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name in folders:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
    archive, sha = write_archive(tmp_path, "p0.tar.gz", buffer.getvalue())
    data_dir = tmp_path / "data"
    with pytest.raises(UnsafeArchiveError, match=clash):
        extract_archive(archive, "p0.tar.gz", sha, data_dir)
    assert_nothing_extracted(data_dir, "p0.tar.gz", sha)


def test_data_folder_reached_through_a_symlink_extracts(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir()
    (tmp_path / "results").symlink_to(tmp_path / "scratch", target_is_directory=True)
    archive, sha = write_archive(tmp_path, "p0.tar.gz", tar_gz({"./MileBench/TaskA/TaskA.json": b"{}"}))
    data_dir = tmp_path / "results" / "data"
    assert extract_archive(archive, "p0.tar.gz", sha, data_dir) is True
    assert (tmp_path / "scratch" / "data" / "MileBench" / "TaskA" / "TaskA.json").read_bytes() == b"{}"
