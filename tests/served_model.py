"""A tiny OpenAI-compatible chat server on 127.0.0.1, as ``vllm serve`` or a gateway speaks it: the model a
user serves themselves, taking no key. It answers every chat request with ``answer`` (or ``status``) and
records what it was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ServedModel:
    answer: str = "A"
    status: int = 200
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path != "/v1/chat/completions":
            return 404, {"error": {"message": f"no route {path}"}}
        if self.status != 200:
            return self.status, {"error": {"message": "the served model refuses this request"}}
        message = {"role": "assistant", "content": self.answer}
        usage = {"prompt_tokens": 10, "completion_tokens": 1}
        return 200, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}


@contextmanager
def served(model: ServedModel) -> Iterator[ServedModel]:
    """``model`` listening on a free port of 127.0.0.1; ``model.url`` is its ``/v1`` base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send(404, {"error": {"message": "GET is not served"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with model.lock:
                model.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            self.send(*model.reply(self.path, body))

        def send(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            """Silent: tests assert on the recorded requests."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    model.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield model
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
