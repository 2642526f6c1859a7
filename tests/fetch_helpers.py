"""Test helpers for the data fetch: tiny tar.gz archives, their locks, and a loopback Range server."""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import TracebackType

from milebench.benchmarks.milebench.spec.data_lock import DataLock, dump_lock
from milebench.spec.pinned_file import ArchiveEntry

MAX_REQUESTS = 20
ENDLESS_LIMIT = 16 << 20


def tar_gz(files: dict[str, bytes], special: Iterable[tarfile.TarInfo] = ()) -> bytes:
    """A gzip'd tar holding ``files`` (name -> content), then the ``special`` members (links, devices)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in special:
            tar.addfile(info)
    return buffer.getvalue()


def link_member(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def entry(name: str, data: bytes) -> ArchiveEntry:
    return ArchiveEntry(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest())


def write_lock(
    path: Path, archives: dict[str, bytes], repo_id: str | None = None, revision: str | None = None
) -> Path:
    """A complete lock for ``archives`` (name -> bytes)."""
    lock = DataLock(
        repo_id=repo_id, revision=revision, archives=tuple(entry(n, d) for n, d in archives.items())
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_lock(lock))
    return path


class RangeServer:
    """Serves ``files`` at ``/<name>`` on 127.0.0.1 and records every request's headers.

    Hostile mirrors: ``trickle_s`` sends the body one byte every ``trickle_s`` seconds, and
    ``trickle_headers_s`` the headers (a status line, then an endless header one byte at a time);
    ``endless`` sends no Content-Length and keeps sending filler after the body (up to ENDLESS_LIMIT
    bytes, so a client that never stops still ends) until the client hangs up.
    """

    def __init__(
        self,
        files: dict[str, bytes],
        *,
        honour_range: bool = True,
        cut_first_after: int | None = None,
        trickle_s: float | None = None,
        trickle_headers_s: float | None = None,
        endless: bool = False,
    ):
        self.files = files
        self.honour_range = honour_range
        self.cut_first_after = cut_first_after
        self.trickle_s = trickle_s
        self.trickle_headers_s = trickle_headers_s
        self.endless = endless
        self.requests: list[dict[str, str]] = []
        self._httpd = HTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    def url(self, name: str = "") -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/{name}"

    def __enter__(self) -> RangeServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 5

            def do_GET(self) -> None:
                server.requests.append({"path": self.path, **dict(self.headers.items())})
                body = server.files.get(self.path.lstrip("/"))
                if body is None or len(server.requests) > MAX_REQUESTS:
                    self.send_error(404)
                    return
                if server.trickle_headers_s is not None:
                    self._trickle_headers(server.trickle_headers_s)
                    return
                match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
                start = int(match.group(1)) if match and server.honour_range else 0
                if start >= len(body) and start:
                    self.send_error(416)
                    return
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                if not server.endless:
                    self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                payload = body[start:]
                if server.cut_first_after is not None and len(server.requests) == 1:
                    payload = payload[: server.cut_first_after]
                    self.close_connection = True
                try:
                    self._send(payload)
                except OSError:
                    self.close_connection = True  # the client hung up, as one that gives up should

            def _trickle_headers(self, pause_s: float) -> None:
                try:
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                    for _ in range(ENDLESS_LIMIT):
                        self.wfile.write(b"a")
                        time.sleep(pause_s)
                except OSError:
                    self.close_connection = True

            def _send(self, payload: bytes) -> None:
                if server.trickle_s is None:
                    self.wfile.write(payload)
                else:
                    for i in range(len(payload)):
                        self.wfile.write(payload[i : i + 1])
                        time.sleep(server.trickle_s)
                sent = len(payload)
                while server.endless and sent < ENDLESS_LIMIT:
                    self.wfile.write(bytes(64 << 10))
                    sent += 64 << 10

            def log_message(self, format: str, *args: object) -> None:
                """Keep test output quiet."""

        return Handler
