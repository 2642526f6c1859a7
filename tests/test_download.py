"""Downloads resume from the .part offset, survive servers that ignore Range, and keep HF_TOKEN private."""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path

import pytest
from fetch_helpers import RangeServer

from milebench.data.download import DownloadError, RetryPolicy, download, hub_url, part_path

BODY = os.urandom(300_000)
FAST = RetryPolicy(attempts=3, backoff_s=0.0, timeout_s=5.0)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


def test_interrupted_transfer_resumes_from_part_offset(tmp_path: Path) -> None:
    cut = 123_457
    dest = tmp_path / "a.tar.gz"
    with RangeServer({"a.tar.gz": BODY}, cut_first_after=cut) as server:
        download(server.url("a.tar.gz"), dest, size=len(BODY), retry=FAST)
    assert dest.read_bytes() == BODY
    assert not part_path(dest).exists()
    assert len(server.requests) == 2
    assert "Range" not in server.requests[0]
    assert server.requests[1]["Range"] == f"bytes={cut}-"


def test_part_left_by_a_killed_run_is_resumed(tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    part_path(dest).write_bytes(BODY[:1000])
    with RangeServer({"a.tar.gz": BODY}) as server:
        download(server.url("a.tar.gz"), dest, size=len(BODY), retry=FAST)
    assert dest.read_bytes() == BODY
    assert [r.get("Range") for r in server.requests] == ["bytes=1000-"]


def test_server_ignoring_range_restarts_from_zero(tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    part_path(dest).write_bytes(b"stale bytes that must not survive")
    with RangeServer({"a.tar.gz": BODY}, honour_range=False) as server:
        download(server.url("a.tar.gz"), dest, size=len(BODY), retry=FAST)
    assert dest.read_bytes() == BODY
    assert server.requests[0]["Range"] == "bytes=33-"


def test_interrupted_transfer_against_range_ignoring_server(tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    with RangeServer({"a.tar.gz": BODY}, honour_range=False, cut_first_after=5000) as server:
        download(server.url("a.tar.gz"), dest, size=len(BODY), retry=FAST)
    assert dest.read_bytes() == BODY
    assert server.requests[1]["Range"] == "bytes=5000-"


def test_complete_part_needs_no_request(tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    part_path(dest).write_bytes(BODY)
    with RangeServer({"a.tar.gz": BODY}) as server:
        download(server.url("a.tar.gz"), dest, size=len(BODY), retry=FAST)
    assert dest.read_bytes() == BODY
    assert server.requests == []


def test_oversized_part_is_discarded(tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    part_path(dest).write_bytes(BODY + b"junk")
    with RangeServer({"a.tar.gz": BODY}) as server:
        download(server.url("a.tar.gz"), dest, size=len(BODY), retry=FAST)
    assert dest.read_bytes() == BODY
    assert "Range" not in server.requests[0]


def test_missing_file_fails_without_retrying(tmp_path: Path) -> None:
    with RangeServer({}) as server, pytest.raises(DownloadError, match="HTTP 404"):
        download(server.url("gone.tar.gz"), tmp_path / "gone.tar.gz", retry=FAST)
    assert len(server.requests) == 1
    assert not (tmp_path / "gone.tar.gz").exists()


def test_token_is_sent_to_hub_urls_only_and_never_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    caplog.set_level(logging.DEBUG)
    with RangeServer({"a.tar.gz": BODY}) as server:
        download(server.url("a.tar.gz"), tmp_path / "hub.tar.gz", auth=True, retry=FAST)
        download(server.url("a.tar.gz"), tmp_path / "mirror.tar.gz", auth=False, retry=FAST)
    assert server.requests[0]["Authorization"] == "Bearer hf_secret_value"
    assert "Authorization" not in server.requests[1]
    assert "hf_secret_value" not in caplog.text


def test_hub_url_honours_hf_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert (
        hub_url("FreedomIntelligence/MileBench", "main", "MileBench_part0.tar.gz")
        == "https://huggingface.co/datasets/FreedomIntelligence/MileBench/resolve/main/MileBench_part0.tar.gz"
    )
    monkeypatch.setenv("HF_ENDPOINT", "https://hf-mirror.example/")
    assert (
        hub_url("o/d", "refs/pr/1", "x") == "https://hf-mirror.example/datasets/o/d/resolve/refs%2Fpr%2F1/x"
    )


def test_file_url_and_plain_path_are_copied(tmp_path: Path) -> None:
    source = tmp_path / "mirror" / "a.tar.gz"
    source.parent.mkdir()
    source.write_bytes(BODY)
    download(source.as_uri(), tmp_path / "one" / "a.tar.gz")
    download(str(source), tmp_path / "two" / "a.tar.gz")
    assert (tmp_path / "one" / "a.tar.gz").read_bytes() == BODY
    assert (tmp_path / "two" / "a.tar.gz").read_bytes() == BODY
    with pytest.raises(DownloadError, match="no such file"):
        download(str(tmp_path / "mirror" / "missing.tar.gz"), tmp_path / "three" / "missing.tar.gz")
    with pytest.raises(DownloadError, match="unsupported URL scheme"):
        download("ftp://example.org/a.tar.gz", tmp_path / "four" / "a.tar.gz")


def test_connection_errors_are_retried_with_backoff_then_reported(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    delays: list[float] = []
    policy = RetryPolicy(attempts=3, backoff_s=0.5, timeout_s=2.0)
    with pytest.raises(DownloadError, match="giving up after 3 attempts"):
        download(
            f"http://127.0.0.1:{port}/a.tar.gz", tmp_path / "a.tar.gz", retry=policy, sleep=delays.append
        )
    assert delays == [0.5, 1.0]
    assert not (tmp_path / "a.tar.gz").exists()


def test_trickling_server_hits_the_overall_deadline_and_the_part_resumes(tmp_path: Path) -> None:
    body = os.urandom(600)
    dest = tmp_path / "a.tar.gz"
    policy = RetryPolicy(attempts=3, backoff_s=0.0, timeout_s=5.0, deadline_s=1.0)
    with RangeServer({"a.tar.gz": body}, trickle_s=0.02) as server:
        started = time.monotonic()
        with pytest.raises(DownloadError, match=r"deadline of 1 s") as err:
            download(server.url("a.tar.gz"), dest, size=len(body), retry=policy)
        elapsed = time.monotonic() - started
    assert elapsed < 6, "a whole 600-byte trickle takes 12 s; the deadline is 1 s"
    received = part_path(dest).stat().st_size
    assert 0 < received < len(body)
    assert str(part_path(dest)) in str(err.value)
    with RangeServer({"a.tar.gz": body}) as server:
        download(server.url("a.tar.gz"), dest, size=len(body), retry=FAST)
    assert dest.read_bytes() == body
    assert [r.get("Range") for r in server.requests] == [f"bytes={received}-"]


def test_server_trickling_its_headers_hits_the_overall_deadline(tmp_path: Path) -> None:
    # Each header byte arrives well within the 5 s read timeout; only an overall deadline ends it.
    policy = RetryPolicy(attempts=3, backoff_s=0.0, timeout_s=5.0, deadline_s=1.0)
    with RangeServer({"a.tar.gz": BODY}, trickle_headers_s=0.02) as server:
        started = time.monotonic()
        with pytest.raises(DownloadError, match=r"deadline of 1 s"):
            download(server.url("a.tar.gz"), tmp_path / "a.tar.gz", size=len(BODY), retry=policy)
        elapsed = time.monotonic() - started
    assert elapsed < 4


def test_default_deadline_grows_with_the_expected_size() -> None:
    policy = RetryPolicy()
    assert policy.deadline_for(10 << 30) > policy.deadline_for(1 << 20) >= policy.deadline_for(None)
    assert RetryPolicy(deadline_s=5.0).deadline_for(10 << 30) == 5.0


def test_body_longer_than_the_lock_size_is_cut_off_and_discarded(tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    expected = f"more than the expected {len(BODY)} bytes"
    with (
        RangeServer({"a.tar.gz": BODY}, endless=True) as server,
        pytest.raises(DownloadError, match=expected),
    ):
        download(server.url("a.tar.gz"), dest, size=len(BODY), retry=FAST)
    assert len(server.requests) == 1
    assert not dest.exists() and not part_path(dest).exists()


def test_resumed_body_longer_than_the_lock_size_is_cut_off(tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    part_path(dest).write_bytes(BODY[:1000])
    with (
        RangeServer({"a.tar.gz": BODY}, endless=True) as server,
        pytest.raises(DownloadError, match="more than"),
    ):
        download(server.url("a.tar.gz"), dest, size=len(BODY), retry=FAST)
    assert server.requests[0]["Range"] == "bytes=1000-"
    assert not dest.exists() and not part_path(dest).exists()


def test_local_file_larger_than_the_lock_size_is_not_copied(tmp_path: Path) -> None:
    source = tmp_path / "mirror" / "a.tar.gz"
    source.parent.mkdir()
    source.write_bytes(BODY + b"more")
    dest = tmp_path / "downloads" / "a.tar.gz"
    with pytest.raises(DownloadError, match=f"more than the expected {len(BODY)} bytes"):
        download(str(source), dest, size=len(BODY))
    assert not dest.exists() and not part_path(dest).exists()
