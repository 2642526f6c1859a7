"""Fetch one archive into ``<name>.part`` and rename it when complete.

Archives are gigabytes, so an interrupted transfer resumes from the bytes already on disk with an HTTP
Range request instead of starting over; a server that ignores Range is detected and restarted from zero.
A mirror is not trusted to end its body: the lock's size caps what is written, and an overall deadline
(not only a per-read timeout, which a server sending a byte now and then never trips, in its headers or
its body) caps how long: ``milebench.http_deadline`` cuts the request when it passes.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlparse
from urllib.request import url2pathname

import requests
import urllib3

from milebench.data.errors import FetchError
from milebench.http_deadline import Deadline, new_session
from milebench.spec.adapters import PROXY_VARS
from milebench.spec.pinned_file import PART_SUFFIX

log = logging.getLogger(__name__)

ENVIRONMENT = ("HF_TOKEN", "HF_ENDPOINT", *PROXY_VARS)
"""Every variable a download reads, by name: the hub token and mirror, the session's proxies. A fetch in a
container gets exactly these."""

DEFAULT_HF_ENDPOINT = "https://huggingface.co"
CHUNK = 1 << 20
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
DEADLINE_BASE_S = 600.0
DEADLINE_MIN_RATE = 256 << 10


class DownloadError(FetchError):
    """A transfer failed for good (bad status, missing file, retries exhausted)."""


class _Transient(Exception):
    """A failure worth retrying: the server is busy or the body ended early."""


TRANSIENT = (requests.RequestException, urllib3.exceptions.HTTPError, _Transient)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry; each retry resumes from the bytes already received.

    ``timeout_s`` bounds each connect and read; ``deadline_s`` bounds one archive's whole download,
    retries included (None: DEADLINE_BASE_S plus the expected size at DEADLINE_MIN_RATE bytes/s).
    """

    attempts: int = 6
    backoff_s: float = 2.0
    timeout_s: float = 60.0
    deadline_s: float | None = None

    def deadline_for(self, size: int | None) -> float:
        """Seconds allowed for downloading ``size`` bytes (unknown size: the base allowance only)."""
        if self.deadline_s is not None:
            return self.deadline_s
        return DEADLINE_BASE_S + (size or 0) / DEADLINE_MIN_RATE


def hub_dataset_url(repo_id: str) -> str:
    """The dataset's address on the hub; HF_ENDPOINT selects a hub mirror."""
    endpoint = (os.environ.get("HF_ENDPOINT") or DEFAULT_HF_ENDPOINT).rstrip("/")
    return f"{endpoint}/datasets/{repo_id}"


def hub_url(repo_id: str, revision: str, name: str) -> str:
    """The resolve URL of one file of the dataset at ``revision``."""
    return f"{hub_dataset_url(repo_id)}/resolve/{quote(revision, safe='')}/{name}"


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + PART_SUFFIX)


def local_source(url: str) -> Path | None:
    """The file behind a ``file://`` URL or a plain path; None for http(s)."""
    scheme = urlparse(url).scheme
    if scheme in ("http", "https"):
        return None
    if scheme == "file":
        return Path(url2pathname(urlparse(url).path))
    if "://" in url:
        raise DownloadError(f"{url}: unsupported URL scheme {scheme!r} (use http, https, file or a path)")
    return Path(url)


def download(
    url: str,
    dest: Path,
    *,
    size: int | None = None,
    auth: bool = False,
    retry: RetryPolicy = RetryPolicy(),
    sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Fetch ``url`` to ``dest`` through ``dest.part``; ``auth`` adds HF_TOKEN (hub URLs only).

    ``size`` (the lock's) caps the bytes accepted: a longer body is cut off and discarded.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    source = local_source(url)
    if source is not None:
        _copy(source, part, url, size)
    else:
        headers = {"Accept-Encoding": "identity"}
        token = os.environ.get("HF_TOKEN") if auth else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        deadline = _Deadline(retry.deadline_for(size), url, part)
        _http_download(url, part, size, headers, retry, deadline, sleep)
    os.replace(part, dest)
    return dest


def _copy(source: Path, part: Path, url: str, size: int | None) -> None:
    if not source.is_file():
        raise DownloadError(f"{url}: no such file {source}")
    if size is not None and source.stat().st_size > size:
        raise DownloadError(_too_long(url, size))
    log.info("copying %s", source)
    shutil.copyfile(source, part)


def _too_long(url: str, size: int) -> str:
    return f"{url}: more than the expected {size} bytes (the lock's size); nothing of it is kept"


class _Deadline:
    """The moment one archive's download must be done by, over all its attempts."""

    def __init__(self, seconds: float, url: str, part: Path):
        self.seconds, self.url, self.part = seconds, url, part
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; raises DownloadError once there are none."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise DownloadError(
                f"{self.url}: not complete within the deadline of {self.seconds:g} s; the bytes received "
                f"are kept in {self.part} and the next fetch resumes from there"
            )
        return left


def _http_download(
    url: str,
    part: Path,
    size: int | None,
    headers: dict[str, str],
    retry: RetryPolicy,
    deadline: _Deadline,
    sleep: Callable[[float], None],
) -> None:
    with new_session() as session:
        for attempt in range(1, retry.attempts + 1):
            timeout = min(retry.timeout_s, deadline.left())
            try:
                with Deadline(deadline.left()):
                    if _fetch_once(session, url, part, size, headers, timeout, deadline):
                        return
            except TRANSIENT as err:
                if attempt == retry.attempts:
                    raise DownloadError(f"{url}: giving up after {attempt} attempts: {err}") from err
                delay = min(retry.backoff_s * 2 ** (attempt - 1), deadline.left())
                log.warning("%s: %s; retrying in %.1f s (attempt %d)", part.name, err, delay, attempt + 1)
                sleep(delay)
    raise DownloadError(f"{url}: no complete transfer after {retry.attempts} attempts")


def _fetch_once(
    session: requests.Session,
    url: str,
    part: Path,
    size: int | None,
    headers: dict[str, str],
    timeout: float,
    deadline: _Deadline,
) -> bool:
    """One request; True when ``part`` holds the whole body, False to start over at once.

    The body is read with ``read1`` (whatever has arrived), so the deadline is checked as bytes come.
    """
    offset = part.stat().st_size if part.exists() else 0
    if size is not None and offset > size:
        log.warning("%s is larger than the expected %d bytes; restarting from zero", part.name, size)
        part.unlink()
        offset = 0
    if size is not None and 0 < size == offset:
        log.info("%s already holds all %d bytes", part.name, size)
        return True
    request_headers = dict(headers)
    if offset:
        request_headers["Range"] = f"bytes={offset}-"
        log.info("resuming %s at byte %d", part.name, offset)
    log.info("downloading %s", url)
    with session.get(url, headers=request_headers, stream=True, timeout=timeout) as resp:
        if resp.status_code == 416 and offset:
            log.warning("%s: the server refused range %d-; restarting from zero", part.name, offset)
            part.unlink()
            return False
        if resp.status_code in RETRY_STATUS:
            raise _Transient(f"HTTP {resp.status_code} {resp.reason}")
        if resp.status_code not in (200, 206):
            hint = "; set HF_TOKEN if the dataset is gated" if resp.status_code in (401, 403) else ""
            raise DownloadError(f"{url}: HTTP {resp.status_code} {resp.reason}{hint}")
        if resp.status_code == 206:
            start = _range_start(resp.headers.get("Content-Range", ""))
            if start != offset:
                raise DownloadError(f"{url}: asked for bytes from {offset}, the server sent from {start}")
            mode = "ab"
        else:
            if offset:
                log.info("%s: the server ignored the range request; restarting from zero", part.name)
            mode, offset = "wb", 0
        length = resp.headers.get("Content-Length")
        total = size if size is not None else (offset + int(length) if length else None)
        progress = _Progress(part.name, offset, total)
        with open(part, mode) as fh:
            while chunk := resp.raw.read1(CHUNK, decode_content=False):
                if size is not None and progress.done + len(chunk) > size:
                    fh.close()
                    part.unlink()
                    raise DownloadError(_too_long(url, size))
                fh.write(chunk)
                progress.advance(len(chunk))
                deadline.left()
            fh.flush()
            os.fsync(fh.fileno())
    if size is not None and progress.done < size:
        raise _Transient(f"body ended at byte {progress.done} of {size}")
    log.info("%s: received %s", part.name, _mib(progress.done))
    return True


def _range_start(content_range: str) -> int | None:
    """Start offset of a ``Content-Range: bytes START-END/TOTAL`` header."""
    unit, _, spec = content_range.partition(" ")
    start = spec.partition("-")[0]
    return int(start) if unit == "bytes" and start.isdigit() else None


class _Progress:
    """Logs a line each time another 5% (or 256 MiB, when the size is unknown) has arrived."""

    def __init__(self, name: str, done: int, total: int | None):
        self.name, self.done, self.total = name, done, total
        self.step = max(total // 20, CHUNK) if total else 256 * CHUNK
        self.next_report = done + self.step

    def advance(self, n: int) -> None:
        self.done += n
        if self.done >= self.next_report:
            self.next_report = self.done + self.step
            of = f" of {_mib(self.total)} ({100 * self.done // self.total}%)" if self.total else ""
            log.info("%s: %s%s", self.name, _mib(self.done), of)


def _mib(n: int) -> str:
    return f"{n / CHUNK:.1f} MiB"
