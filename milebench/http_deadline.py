"""An overall deadline for HTTP requests made with ``requests``, which bounds each socket operation, not
the request: a server that sends a byte every few seconds, in its headers or its body, keeps a request
open for ever. A timer shuts the request's sockets down at the deadline, which ends the read in progress
in whatever thread blocks on it. Used by API requests and data downloads alike.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import threading
from typing import Any

import requests
from requests.adapters import HTTPAdapter

_running = threading.local()
"""The deadline of the request the current thread is making, if any."""


def _cut(target: Any) -> None:
    """Shut down a socket, or the socket a connection holds now."""
    sock = target if isinstance(target, socket.socket) else getattr(target, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class Deadline:
    """Shuts down every connection and socket the current thread's request uses once ``seconds`` have
    passed."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._targets: list[Any] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        _running.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        _running.deadline = None

    def watch(self, target: Any) -> None:
        with self._lock:
            self._targets.append(target)
            expired = self.expired
        if expired:
            _cut(target)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            targets = list(self._targets)
        for target in targets:
            _cut(target)


class _Watched:
    """Connection mixin: puts the connection under the running request's deadline before it connects
    (the TLS handshake included) and before each request it sends (a reused connection), then the
    socket itself once the request is sent: a connection told to close lets go of its socket after the
    headers, while the body is still read from it."""

    sock: socket.socket | None

    def connect(self) -> None:
        _watch(self)
        super().connect()  # type: ignore[misc]

    def request(self, *args: Any, **kwargs: Any) -> Any:
        _watch(self)
        sent = super().request(*args, **kwargs)  # type: ignore[misc]
        _watch(self.sock)
        return sent


def _watch(target: Any) -> None:
    deadline = getattr(_running, "deadline", None)
    if deadline is not None and target is not None:
        deadline.watch(target)


@functools.cache
def _watched(cls: type) -> type:
    return cls if issubclass(cls, _Watched) else type(f"Watched{cls.__name__}", (_Watched, cls), {})


class DeadlineAdapter(HTTPAdapter):
    """Hands out connection pools (direct, proxied or SOCKS) whose connections obey the deadline."""

    def get_connection_with_tls_context(
        self, request: requests.PreparedRequest, verify: Any, proxies: Any = None, cert: Any = None
    ) -> Any:
        pool = super().get_connection_with_tls_context(request, verify, proxies=proxies, cert=cert)
        # requests' stubs type the pool as urllib3's ConnectionPool base; it is an HTTPConnectionPool
        pool.ConnectionCls = _watched(pool.ConnectionCls)  # type: ignore[attr-defined]
        return pool


def new_session() -> requests.Session:
    session = requests.Session()
    adapter = DeadlineAdapter()
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session
