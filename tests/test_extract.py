"""Safe extraction: every unsafe member refuses the whole archive; extraction is atomic and idempotent."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import pytest
from fetch_helpers import link_member, tar_gz

from milebench.data import extract
from milebench.data.extract import UnsafeArchiveError, extract_archive, marker_path

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
    assert not list(data_dir.glob(".extract-*"))


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
    assert not list(data_dir.glob(".extract-*"))


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


def test_inner_symlink_is_allowed(tmp_path: Path) -> None:
    link = link_member("MileBench/TaskA/images/alias.jpg", "1.jpg", tarfile.SYMTYPE)
    archive, sha = write_archive(tmp_path, "p0.tar.gz", tar_gz(GOOD, [link]))
    data_dir = tmp_path / "data"
    extract_archive(archive, "p0.tar.gz", sha, data_dir)
    alias = data_dir / "MileBench/TaskA/images/alias.jpg"
    assert alias.is_symlink() and alias.read_bytes() == b"jpg"


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
    (data_dir / ".extract-p0.tar.gz-stale").mkdir()
    assert extract_archive(archive, "p0.tar.gz", sha, data_dir) is True
    assert (data_dir / "MileBench/TaskA/TaskA.json").is_file()
    assert not list(data_dir.glob(".extract-*"))


def test_corrupt_gzip_is_a_clear_error(tmp_path: Path) -> None:
    archive, sha = write_archive(tmp_path, "p0.tar.gz", b"not a tar archive")
    data_dir = tmp_path / "data"
    with pytest.raises(extract.FetchError, match="cannot read archive"):
        extract_archive(archive, "p0.tar.gz", sha, data_dir)
    assert_nothing_extracted(data_dir, "p0.tar.gz", sha)
