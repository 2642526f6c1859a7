"""Data rules stated as facts: image-count levels, file names, byte ranges, archive members."""

from __future__ import annotations

import logging
import re
import tarfile
from pathlib import Path

import pytest

from milebench.benchmarks.milebench.data.extract import (
    UnsafeArchiveError,
    check_archive,
    destination,
    member_problem,
    name_clashes,
)
from milebench.benchmarks.milebench.data.schema import quantity_level, task_json_path
from milebench.data.download import DownloadError, _Progress, _range_start, hub_url, local_source
from milebench.data.verify import quarantine


@pytest.mark.parametrize(
    ("n_images", "level"),
    [(1, "Few"), (5, "Few"), (6, "Medium"), (31, "Medium"), (32, "Many"), (109, "Many")],
)
def test_levels_split_below_6_and_above_31_images(n_images: int, level: str) -> None:
    assert quantity_level(n_images) == level


def test_the_adversarial_file_sits_beside_the_test_set() -> None:
    assert task_json_path("WebQA") == "WebQA/WebQA.json"
    assert task_json_path("WebQA", adversarial=True) == "WebQA/WebQA-adv.json"


@pytest.mark.parametrize(
    ("header", "start"),
    [
        ("bytes 100-199/200", 100),
        ("bytes 0-9/10", 0),
        ("items 100-199/200", None),
        ("bytes */200", None),
        ("", None),
    ],
)
def test_the_start_of_a_content_range(header: str, start: int | None) -> None:
    assert _range_start(header) == start


def test_hub_urls_quote_the_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert hub_url("org/data", "refs/pr/1", "part0.tar.gz") == (
        "https://huggingface.co/datasets/org/data/resolve/refs%2Fpr%2F1/part0.tar.gz"
    )


def test_local_sources_are_files_or_paths_and_other_schemes_are_refused(tmp_path: Path) -> None:
    assert local_source("https://example.org/a") is None
    assert local_source("http://example.org/a") is None
    assert local_source(f"file://{tmp_path}/a b") == tmp_path / "a b"
    assert local_source(str(tmp_path / "a")) == tmp_path / "a"
    with pytest.raises(DownloadError, match=r"^ftp://x/a: unsupported URL scheme 'ftp'"):
        local_source("ftp://x/a")


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


ONLY = "archives may hold folders and regular files only"


@pytest.mark.parametrize(
    ("info", "problem"),
    [
        (member("MileBench/a.json"), None),
        (member("MileBench/sub", tarfile.DIRTYPE), None),
        (member("MileBench/sub/../a.json"), None),
        (member("MileBench/l", tarfile.SYMTYPE, "sub/a.json"), f"symlink to 'sub/a.json'; {ONLY}"),
        (member("MileBench/l", tarfile.SYMTYPE, "/etc"), f"symlink to '/etc'; {ONLY}"),
        (
            member("MileBench/h", tarfile.LNKTYPE, "MileBench/a.json"),
            f"hardlink to 'MileBench/a.json'; {ONLY}",
        ),
        (member("MileBench/p", tarfile.FIFOTYPE), f"device or fifo; {ONLY}"),
        (member("MileBench/b", tarfile.BLKTYPE), f"device or fifo; {ONLY}"),
        (member("MileBench/c", tarfile.CHRTYPE), f"device or fifo; {ONLY}"),
        (member("MileBench/x", tarfile.XHDTYPE), f"member type {tarfile.XHDTYPE!r}; {ONLY}"),
        (member("MileBench/a\0b"), "NUL byte in the name"),
        (member("/abs"), "absolute path"),
        (member(".."), "path escapes the target folder"),
        (member("MileBench/../../x"), "path escapes the target folder"),
    ],
)
def test_which_archive_members_may_be_extracted(
    tmp_path: Path, info: tarfile.TarInfo, problem: str | None
) -> None:
    """Only folders and regular files, named inside the target folder, are extracted."""
    root = tmp_path.resolve()
    assert member_problem(info, destination(root, info.name)) == problem


def test_every_bad_copy_is_kept_aside_under_its_utc_time(tmp_path: Path) -> None:
    """Quarantine never reuses or refuses its folder: each bad file keeps its name plus a UTC stamp."""
    bad = [tmp_path / "MileBench_part0.tar.gz", tmp_path / "MileBench_part1.tar.gz"]
    for path in bad:
        path.write_bytes(b"bad")
    moved = [quarantine(path, tmp_path / "quarantine") for path in bad]
    assert [m.read_bytes() for m in moved] == [b"bad", b"bad"] and not any(p.exists() for p in bad)
    assert all(
        re.fullmatch(rf"{re.escape(p.name)}\.\d{{8}}T\d{{6}}\.\d{{6}}Z", m.name)
        for p, m in zip(bad, moved, strict=True)
    )


def test_a_file_named_twice_or_named_like_a_folder_clashes() -> None:
    once, folder = member("MileBench/a.json"), member("MileBench/sub", tarfile.DIRTYPE)
    assert name_clashes([once, folder, member("MileBench/sub/b.json")]) == []
    assert name_clashes([once, once]) == ["MileBench/a.json: named more than once"]
    assert name_clashes([folder, member("MileBench/sub")]) == ["MileBench/sub: both a file and a folder"]


@pytest.mark.parametrize(("n_bad", "more"), [(10, ""), (11, "\n  ... and 1 more")])
def test_a_refused_archive_lists_its_first_ten_problems(tmp_path: Path, n_bad: int, more: str) -> None:
    links = [member(f"MileBench/l{i:02}", tarfile.SYMTYPE, "x") for i in range(n_bad)]
    with pytest.raises(UnsafeArchiveError) as err:
        check_archive(links, tmp_path, tmp_path / "a.tar.gz")
    shown = "\n  ".join(f"MileBench/l{i:02}: symlink to 'x'; {ONLY}" for i in range(10))
    assert str(err.value) == f"refusing to extract {tmp_path / 'a.tar.gz'}; unsafe members:\n  {shown}{more}"


def test_download_progress_is_logged_every_5_percent_or_256_mib_when_the_size_is_unknown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    known, unknown = _Progress("a.tar.gz", 0, 100 << 20), _Progress("b.tar.gz", 0, None)
    with caplog.at_level(logging.INFO, logger="milebench.data.download"):
        known.advance(5 << 20)
        unknown.advance(256 << 20)
    assert caplog.messages == ["a.tar.gz: 5.0 MiB of 100.0 MiB (5%)", "b.tar.gz: 256.0 MiB"]
