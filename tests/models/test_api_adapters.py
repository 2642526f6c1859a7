"""API adapters against a local server speaking each provider's real wire format (no client mocks)."""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
import yaml
from PIL import Image
from pipeline_runs import TASKS, snakemake, write_run

from milebench import cli
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import QuestionType
from milebench.infer.adapter import AdapterError
from milebench.infer.api.base import ApiAdapter
from milebench.infer.api.client import MESSAGE_LIMIT, RateLimiter, retry_after
from milebench.infer.engine import cache_key, run_model
from milebench.infer.records import FailureKind, Prediction
from milebench.infer.registry import adapter_class, load_adapter
from milebench.io import read_jsonl
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.model import ModelSpec

PROVIDERS = ("openai", "anthropic", "google")
ADAPTER = {"openai": "openai-chat", "anthropic": "anthropic", "google": "gemini"}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "google": "GOOGLE_API_KEY"}
URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL", "google": "GOOGLE_GEMINI_BASE_URL"}
MODEL_ID = {"openai": "gpt-4o", "anthropic": "claude-3-opus-20240229", "google": "gemini-1.5-pro-latest"}
SECRET = "sk-test+SECRET/0123456789=abcdef"
"""Has characters that URL encoding and base64 alignment change, so every encoded form differs."""
MAX_REQUESTS = 60
"""Every fake server stops answering after this many requests, so a looping client cannot hang a test."""
TRICKLE_S = 0.05
TRICKLE_BYTES = 40
"""A trickling reply sends its first bytes one per TRICKLE_S (2 s in all), then the rest at once."""


# ---------------------------------------------------------------- wire formats, as the providers send them


def success(provider: str, text: str, n_in: int, n_out: int) -> dict[str, Any]:
    if provider == "openai":
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": MODEL_ID[provider],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
        }
    if provider == "anthropic":
        return {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": MODEL_ID[provider],
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": n_in, "output_tokens": n_out},
        }
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": n_in,
            "candidatesTokenCount": n_out,
            "totalTokenCount": n_in + n_out,
        },
    }


def error(provider: str, status: int, message: str) -> dict[str, Any]:
    kinds = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}
    if provider == "openai":
        code = {400: "context_length_exceeded", 429: "rate_limit_exceeded"}.get(status)
        return {"error": {"message": message, "type": kinds.get(status, "server_error"), "code": code}}
    if provider == "anthropic":
        return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}
    statuses = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED"}
    return {"error": {"code": status, "message": message, "status": statuses.get(status, "INTERNAL")}}


OVERFLOW_MESSAGE = {
    "openai": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
    "131072 tokens. Please reduce the length of the messages.",
    "anthropic": "prompt is too long: 208123 tokens > 200000 maximum",
    "google": "The input token count (2100000) exceeds the maximum number of tokens allowed (2097152).",
}


def received_parts(provider: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """("text", text) and ("image", base64) parts of the request's single user turn, in order."""
    if provider == "google":
        (turn,) = body["contents"]
        return [
            ("text", p["text"]) if "text" in p else ("image", p["inline_data"]["data"]) for p in turn["parts"]
        ]
    (turn,) = body["messages"]
    parts = []
    for p in turn["content"]:
        if p["type"] == "text":
            parts.append(("text", p["text"]))
        elif p["type"] == "image_url":
            parts.append(("image", p["image_url"]["url"].split("base64,", 1)[1]))
        else:
            parts.append(("image", p["source"]["data"]))
    return parts


def key_received(provider: str, headers: dict[str, str]) -> str | None:
    if provider == "openai":
        return headers.get("authorization", "").removeprefix("Bearer ") or None
    return headers.get("x-api-key" if provider == "anthropic" else "x-goog-api-key")


def expected_path(provider: str) -> str:
    return {
        "openai": "/v1/chat/completions",
        "anthropic": "/v1/messages",
        "google": f"/v1beta/models/{MODEL_ID['google']}:generateContent",
    }[provider]


# ---------------------------------------------------------------- the fake server


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None
    """Sent instead of the JSON of ``body`` (a proxy's HTML page, say)."""
    trickle: str | None = None
    """``"headers"`` or ``"body"``: the part whose first TRICKLE_BYTES go one byte per TRICKLE_S."""
    length: int | None = None
    """The Content-Length to declare, when not the body's own."""

    def wire(self) -> tuple[bytes, bytes]:
        payload = json.dumps(self.body).encode() if self.raw is None else self.raw
        length = len(payload) if self.length is None else self.length
        lines = [f"HTTP/1.0 {self.status} Reply", "Content-Type: application/json"]
        lines += [f"Content-Length: {length}", *(f"{k}: {v}" for k, v in self.headers.items())]
        return ("\r\n".join(lines) + "\r\n\r\n").encode(), payload


Script = Reply | Callable[[dict[str, str]], Reply]
"""A scripted reply, or one made from the request's headers (an echoing provider)."""


@dataclass
class FakeApi:
    """Answers scripted replies first, then successes whose text names the parts it received."""

    provider: str
    script: list[Script] = field(default_factory=list)
    hold_for: int = 0
    """Hold each request until this many are in flight (or HOLD_S passed), to expose the concurrency."""
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Condition = field(default_factory=threading.Condition)

    HOLD_S = 0.3

    def next_reply(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        if key_received(self.provider, headers) != SECRET:
            given = key_received(self.provider, headers)
            return Reply(401, error(self.provider, 401, f"Incorrect API key provided: {given}."))
        with self.lock:
            item = self.script.pop(0) if self.script else None
        if item is not None:
            return item(headers) if callable(item) else item
        kinds = [kind for kind, _ in received_parts(self.provider, body)]
        return Reply(200, success(self.provider, " " + ",".join(kinds) + " ", 100 + len(kinds), 3))

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
        headers = {k.lower(): v for k, v in handler.headers.items()}
        with self.lock:
            self.requests.append(
                {"path": handler.path, "headers": headers, "body": body, "t": time.monotonic()}
            )
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.lock.notify_all()
            if self.hold_for:
                self.lock.wait_for(lambda: self.in_flight >= self.hold_for, timeout=self.HOLD_S)
        reply = self.next_reply(body, headers)
        time.sleep(reply.delay)
        head, payload = reply.wire()
        wire = head + payload
        start = len(head) if reply.trickle == "body" else 0
        end = start + (TRICKLE_BYTES if reply.trickle else 0)
        try:
            handler.wfile.write(wire[:start])
            for i in range(start, end):
                handler.wfile.write(wire[i : i + 1])
                time.sleep(TRICKLE_S)
            handler.wfile.write(wire[end:])
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with self.lock:
                self.in_flight -= 1
                self.lock.notify_all()


def serve(api: FakeApi) -> Iterator[FakeApi]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if len(api.requests) >= MAX_REQUESTS:
                self.send_error(503, "request budget of the fake server spent")
                return
            api.handle(self)

        def log_message(self, format: str, *args: Any) -> None:
            """Silent: the test asserts on recorded requests, not on stderr."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    api.url = f"http://127.0.0.1:{server.server_address[1]}" + ("/v1" if api.provider == "openai" else "")
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ---------------------------------------------------------------- fixtures


def api_spec(provider: str, base_url: str | None, **limits: Any) -> ModelSpec:
    weights: dict[str, Any] = {"kind": "api", "provider": provider, "model_id": MODEL_ID[provider]}
    weights["base_url"] = base_url
    weights["limits"] = {"backoff_s": 0.01, "max_backoff_s": 0.05, "timeout_s": 5.0, **limits}
    weights["pricing"] = {"price_per_1k_input": 0.01, "price_per_1k_output": 0.03}
    return ModelSpec.model_validate(
        {
            "name": f"fake-{provider}",
            "display_name": provider,
            "section": "closed",
            "adapter": ADAPTER[provider],
            "weights": weights,
            "notes": "test model",
        }
    )


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "MileBench"
    (root / "WebQA/images").mkdir(parents=True)
    Image.new("RGB", (8, 6), (255, 0, 0)).save(root / "WebQA/images/a.png")
    Image.new("RGB", (6, 8), (0, 255, 0)).save(root / "WebQA/images/b.jpg")
    Image.new("RGB", (5, 5), (0, 0, 255)).save(root / "WebQA/images/c.bmp")
    return root


def prepared(sample_id: int, images: tuple[str, ...] = ("a.png", "b.jpg", "c.bmp")) -> PreparedSample:
    marks = "".join(f"<ImageHere> picture {i} " for i in range(len(images)))
    return PreparedSample(
        task="WebQA",
        mode=Mode.MULTI_IMAGE,
        sample_id=sample_id,
        instruction="Answer the question.",
        context=f"{marks}Which is red?\nChoice list: \nA. a\nB. b\nYour answer is: ",
        images=tuple(f"WebQA/images/{name}" for name in images),
        image_sha256=tuple(f"{i:064x}" for i in range(len(images))),
        prompt_sha256=f"{sample_id:064x}",
        question_type=QuestionType.MULTI_CHOICE,
        choices=("a", "b"),
        response="a",
        image_quantity_level="Few",
        n_images=len(images),
    )


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in (*KEY_ENV.values(), *URL_ENV.values()):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_ENV[request.param], SECRET)
    return request.param


@pytest.fixture
def api(provider: str) -> Iterator[FakeApi]:
    yield from serve(FakeApi(provider))


def adapter_for(spec: ModelSpec, data_root: Path, sleeps: list[float] | None = None) -> ApiAdapter:
    adapter = load_adapter(spec, RunPaths(out=data_root.parent, reports=data_root.parent), data_root)
    assert isinstance(adapter, ApiAdapter)
    if sleeps is not None:
        adapter.client.sleep = sleeps.append
    return adapter


def run(
    adapter: ApiAdapter,
    spec: ModelSpec,
    samples: list[PreparedSample],
    out: Path,
    journal: Path | None = None,
) -> list[Prediction]:
    run_model(adapter, spec, samples, out, journal)
    return [Prediction.model_validate(r) for r in read_jsonl(out)]


SPREAD = {"spaced out": " ".join, "dashed": "-".join, "dotted": ". ".join}
"""Ways a hostile endpoint may spell the key out, a separator between its characters."""


def spellings(secret: str) -> dict[str, str]:
    """The key reversed, and the key and its reverse spelled out with each separator of ``SPREAD``."""
    found = {"reversed": secret[::-1]}
    for name, spell in SPREAD.items():
        found |= {name: spell(secret), f"{name} and reversed": spell(secret[::-1])}
    return found


def key_forms(secret: str) -> list[str]:
    """The key as is, URL-encoded, in base64 alone and in the usual header forms, spelled out or reversed,
    and every 10-character piece of these: none of them may be written or logged."""
    wrapped = [secret, f"Bearer {secret}", f"user:{secret}", f":{secret}"]
    encoded = [base64.b64encode(w.encode()).decode().rstrip("=") for w in wrapped]
    encoded += [base64.urlsafe_b64encode(w.encode()).decode().rstrip("=") for w in wrapped]
    pieces = [form[i : i + 10] for form in (secret, secret[::-1]) for i in range(len(form) - 9)]
    return [
        secret,
        *spellings(secret).values(),
        quote(secret, safe=""),
        quote_plus(secret),
        *encoded,
        *pieces,
    ]


def assert_no_key(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    written = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    for form in key_forms(SECRET):
        for path, data in written.items():
            assert form.encode() not in data, f"{form!r} in {path}"
        assert form not in caplog.text, f"{form!r} logged"


# ---------------------------------------------------------------- tests


def test_images_in_prompt_order_with_usage_and_cost(
    provider: str, api: FakeApi, data_root: Path, tmp_path: Path
) -> None:
    spec = api_spec(provider, api.url, max_retries=0)
    (pred,) = run(adapter_for(spec, data_root), spec, [prepared(0)], tmp_path / "p.jsonl")
    assert pred.failure is None
    assert pred.response == "text,image,text,image,text,image,text"
    assert (pred.input_tokens, pred.output_tokens) == (107, 3)
    assert pred.cost_usd == pytest.approx((107 * 0.01 + 3 * 0.03) / 1000)
    assert pred.batch_size == 1

    (request,) = api.requests
    assert request["path"] == expected_path(provider)
    parts = received_parts(provider, request["body"])
    texts = [value for kind, value in parts if kind == "text"]
    assert texts[0] == "Answer the question.\n"
    assert texts[1:3] == [" picture 0 ", " picture 1 "]
    images = [base64.b64decode(value) for kind, value in parts if kind == "image"]
    assert images[0] == (data_root / "WebQA/images/a.png").read_bytes()
    assert images[1] == (data_root / "WebQA/images/b.jpg").read_bytes()
    assert images[2].startswith(b"\x89PNG"), "BMP is re-encoded as PNG"
    body = request["body"]
    config = body["generationConfig"] if provider == "google" else body
    assert config["temperature"] == 0
    assert config["maxOutputTokens" if provider == "google" else "max_tokens"] == 512
    if provider != "google":
        assert body["model"] == MODEL_ID[provider]
    if provider == "anthropic":
        assert request["headers"]["anthropic-version"] == "2023-06-01"


def test_429_then_success_honours_retry_after(provider: str, data_root: Path, tmp_path: Path) -> None:
    fake = FakeApi(provider, [Reply(429, error(provider, 429, "Rate limit reached"), {"Retry-After": "3"})])
    for api in serve(fake):
        spec = api_spec(provider, api.url, max_retries=2)
        sleeps: list[float] = []
        (pred,) = run(adapter_for(spec, data_root, sleeps), spec, [prepared(0)], tmp_path / "p.jsonl")
        assert pred.failure is None and pred.response
        assert sleeps == [3.0]
        assert len(api.requests) == 2


def test_500_exhausted_is_recorded_and_the_job_continues(
    provider: str, data_root: Path, tmp_path: Path
) -> None:
    server_error = Reply(500, error(provider, 500, "An internal error has occurred"))
    for api in serve(FakeApi(provider, [server_error] * 3)):
        spec = api_spec(provider, api.url, max_retries=2, concurrency=1)
        sleeps: list[float] = []
        preds = run(
            adapter_for(spec, data_root, sleeps), spec, [prepared(0), prepared(1)], tmp_path / "p.jsonl"
        )
        assert preds[0].failure is FailureKind.API_ERROR
        assert preds[0].response is None
        assert "HTTP 500: An internal error has occurred" in (preds[0].failure_detail or "")
        assert preds[1].failure is None and preds[1].response
        assert len(api.requests) == 4
        assert len(sleeps) == 2
        # equal jitter: attempt k waits between half and all of min(max_backoff, backoff * 2**k)
        assert 0.005 <= sleeps[0] <= 0.01 and 0.01 <= sleeps[1] <= 0.02


def test_context_overflow_is_not_retried(provider: str, data_root: Path, tmp_path: Path) -> None:
    status = 400
    for api in serve(FakeApi(provider, [Reply(status, error(provider, status, OVERFLOW_MESSAGE[provider]))])):
        spec = api_spec(provider, api.url, max_retries=3)
        (pred,) = run(adapter_for(spec, data_root, []), spec, [prepared(0)], tmp_path / "p.jsonl")
        assert pred.failure is FailureKind.CONTEXT_OVERFLOW
        assert len(api.requests) == 1


def test_other_client_errors_fail_at_once(provider: str, data_root: Path, tmp_path: Path) -> None:
    for api in serve(FakeApi(provider, [Reply(400, error(provider, 400, "Invalid image data"))])):
        spec = api_spec(provider, api.url, max_retries=3)
        (pred,) = run(adapter_for(spec, data_root, []), spec, [prepared(0)], tmp_path / "p.jsonl")
        assert pred.failure is FailureKind.API_ERROR
        assert len(api.requests) == 1


def test_timeout_retried_then_recorded(provider: str, data_root: Path, tmp_path: Path) -> None:
    slow = Reply(200, success(provider, "late", 1, 1), delay=0.6)
    for api in serve(FakeApi(provider, [slow, slow])):
        spec = api_spec(provider, api.url, max_retries=1, timeout_s=0.2)
        sleeps: list[float] = []
        (pred,) = run(adapter_for(spec, data_root, sleeps), spec, [prepared(0)], tmp_path / "p.jsonl")
        assert pred.failure is FailureKind.TIMEOUT
        assert len(sleeps) == 1 and len(api.requests) == 2
    for api in serve(FakeApi(provider, [slow])):
        spec = api_spec(provider, api.url, max_retries=1, timeout_s=0.2)
        (pred,) = run(adapter_for(spec, data_root, []), spec, [prepared(0)], tmp_path / "q.jsonl")
        assert pred.failure is None and pred.response


def test_concurrency_limit_holds(provider: str, data_root: Path, tmp_path: Path) -> None:
    for api in serve(FakeApi(provider, hold_for=3)):
        spec = api_spec(provider, api.url, concurrency=2)
        samples = [prepared(i, images=("a.png",)) for i in range(6)]
        preds = run(adapter_for(spec, data_root), spec, samples, tmp_path / "p.jsonl")
        assert [p.failure for p in preds] == [None] * 6
        assert {p.batch_size for p in preds} == {6}
        assert api.max_in_flight == 2


def test_request_rate_is_limited(provider: str, data_root: Path, tmp_path: Path) -> None:
    for api in serve(FakeApi(provider)):
        spec = api_spec(provider, api.url, concurrency=4, requests_per_minute=1200)
        samples = [prepared(i, images=("a.png",)) for i in range(5)]
        run(adapter_for(spec, data_root), spec, samples, tmp_path / "p.jsonl")
        times = sorted(r["t"] for r in api.requests)
        # 1200/min is one start every 50 ms: 5 requests span at least ~200 ms (loose lower bound only)
        assert times[-1] - times[0] >= 0.15


def test_rate_limiter_spaces_starts() -> None:
    sleeps: list[float] = []
    limiter = RateLimiter(60, clock=lambda: 100.0, sleep=sleeps.append)
    for _ in range(3):
        limiter.wait()
    assert sleeps == [1.0, 2.0]
    unlimited = RateLimiter(None, sleep=sleeps.append)
    unlimited.wait()
    assert sleeps == [1.0, 2.0]


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after": "7"}) == 7.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None
    for unusable in ("nan", "inf", "-inf", "-5", "1e400"):
        assert retry_after({"retry-after": unusable}) is None, unusable
        assert retry_after({"retry-after-ms": unusable}) is None, unusable
    assert retry_after({"retry-after-ms": "nan", "retry-after": "7"}) == 7.0


def test_key_never_leaks(
    provider: str,
    data_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server_error = Reply(500, error(provider, 500, f"internal error for key {SECRET}"))
    for api in serve(FakeApi(provider, [server_error])):
        spec = api_spec(provider, api.url, max_retries=1)
        out = tmp_path / "run" / "p.jsonl"
        preds = run(adapter_for(spec, data_root, []), spec, [prepared(0), prepared(1)], out)
        assert all(p.failure is None for p in preds)
        assert all(key_received(provider, r["headers"]) == SECRET for r in api.requests)

        monkeypatch.setenv(KEY_ENV[provider], SECRET + "-wrong")
        wrong = run(adapter_for(spec, data_root, []), spec, [prepared(2)], tmp_path / "run" / "q.jsonl")
        assert wrong[0].failure is FailureKind.API_ERROR
        assert "[redacted]" in (wrong[0].failure_detail or "")
    assert len([p for p in tmp_path.rglob("*") if p.is_file()]) > 3
    assert_no_key(tmp_path, caplog)
    assert SECRET not in json.dumps(spec.model_dump(mode="json"))


def header_dump(headers: dict[str, str]) -> str:
    return "\n".join(f"{name}: {value}" for name, value in headers.items())


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


Hostile = Callable[[str, dict[str, str]], Reply]
"""A reply made from the provider name and the request's headers."""


def answering(text: str) -> Hostile:
    return lambda p, h: Reply(200, success(p, text, 1, 1))


def failing(text: str) -> Hostile:
    return lambda p, h: Reply(400, error(p, 400, text))


HOSTILE_ERRORS: dict[str, Hostile] = {
    "key across the message cut": lambda p, h: Reply(400, error(p, 400, "x" * (MESSAGE_LIMIT - 12) + SECRET)),
    "proxy page echoing the request": lambda p, h: Reply(
        502, {}, raw=f"<html><pre>{header_dump(h)}</pre></html>".encode()
    ),
    "encoded keys": lambda p, h: Reply(
        400,
        error(p, 400, f"bad {b64(SECRET)} {b64('Bearer ' + SECRET)} {b64('user:' + SECRET)} {quote(SECRET)}"),
    ),
}
HOSTILE_ANSWERS: dict[str, Hostile] = {
    "answer echoing the headers": lambda p, h: Reply(200, success(p, header_dump(h), 1, 1)),
    "answer with basic auth": lambda p, h: Reply(
        200, success(p, "Authorization: Basic " + b64("user:" + SECRET), 1, 1)
    ),
    "answer with a piece of the key": lambda p, h: Reply(200, success(p, f"B, and {SECRET[4:16]}", 1, 1)),
    **{f"answer with the key {how}": answering(f"B {form}") for how, form in spellings(SECRET).items()},
}
HOSTILE_ERRORS |= {
    f"error with the key {how}": failing(f"bad key {form}") for how, form in spellings(SECRET).items()
}


@pytest.mark.parametrize("scenario", [*HOSTILE_ERRORS, *HOSTILE_ANSWERS])
def test_hostile_provider_cannot_get_the_key_written_or_logged(
    provider: str, scenario: str, data_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    make = HOSTILE_ERRORS.get(scenario) or HOSTILE_ANSWERS[scenario]
    run_dir = tmp_path / "run"
    for api in serve(FakeApi(provider, [lambda headers: make(provider, headers)])):
        spec = api_spec(provider, api.url, max_retries=1, concurrency=1)
        samples = [prepared(0), prepared(1)]
        preds = run(adapter_for(spec, data_root, []), spec, samples, run_dir / "p.jsonl", run_dir / "j.jsonl")
    if scenario in HOSTILE_ANSWERS:
        assert preds[0].failure is FailureKind.API_ERROR and preds[0].response is None
        assert "API key" in (preds[0].failure_detail or "")
    assert preds[1].failure is None and preds[1].response
    assert (run_dir / "j.jsonl").stat().st_size > 0
    assert_no_key(tmp_path, caplog)


@pytest.mark.slow
def test_a_bundle_of_a_run_against_a_hostile_provider_holds_no_key(tmp_path: Path) -> None:
    """A run of the real pipeline (Snakemake) against a provider that echoes the key spelled out and
    reversed, in answers and in errors, then `milebench archive`: its predictions, journals and logs
    travel into the bundle, and no form of the key is in any file of it."""
    forms = spellings(SECRET)
    hostile = [answering(f"B {forms['spaced out']}"), answering(forms["reversed"])]
    hostile += [failing(f"bad key {forms['dotted and reversed']}")]
    root, bundle = tmp_path / "run", tmp_path / "bundle"
    for api in serve(FakeApi("openai", [lambda h, make=make: make("openai", h) for make in hostile])):
        config = write_run(root, "hostile", ["gpt-4o"])
        spec_file = root / "specs" / "runs" / "hostile.yaml"
        run_spec = yaml.safe_load(spec_file.read_text())  # the failed samples may not stop the run
        spec_file.write_text(yaml.safe_dump({**run_spec, "max_failure_rate": 1, "allow_incomplete": True}))
        env = {**os.environ, KEY_ENV["openai"]: SECRET, URL_ENV["openai"]: api.url}
        snakemake(root, "--cores", "1", *config, env=env)
        assert len(api.requests) == 2 * len(TASKS)
    argv = ["--specs", str(root / "specs"), "archive", "--run", "hostile", "--root", str(root)]
    assert cli.main([*argv, "--out", str(bundle), "--no-images"]) == 0
    # all but the kit's own source (source/<commit>.tar), which holds this test and its made-up key
    written = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file() and p.parent.name != "source"}
    kinds = {p.relative_to(bundle).parts[3] for p in written if len(p.relative_to(bundle).parts) > 3}
    assert {"predictions", "journal", "logs"} <= kinds
    for form in key_forms(SECRET):
        assert not [p for p, data in written.items() if form.encode() in data], form
    predictions = [p for p in written if "predictions" in p.parts and p.suffix == ".jsonl"]
    failed = [r for p in predictions for r in read_jsonl(p) if r["failure"] is not None]
    assert len(failed) == len(hostile) and any("[redacted]" in r["failure_detail"] for r in failed)


def test_redirect_is_not_followed(
    provider: str, data_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A redirect would carry the key's header to another server."""
    caplog.set_level(logging.DEBUG)
    for elsewhere in serve(FakeApi(provider)):
        moved = Reply(307, error(provider, 307, "moved"), {"Location": elsewhere.url + "/moved"})
        for api in serve(FakeApi(provider, [moved])):
            spec = api_spec(provider, api.url, max_retries=2)
            (pred,) = run(adapter_for(spec, data_root, []), spec, [prepared(0)], tmp_path / "p.jsonl")
            assert pred.failure is FailureKind.API_ERROR and "HTTP 307" in (pred.failure_detail or "")
        assert elsewhere.requests == []
    assert_no_key(tmp_path, caplog)


def in_years(years: int) -> str:
    return email.utils.formatdate(time.time() + years * 365 * 86400, usegmt=True)


@pytest.mark.parametrize(
    "asked",
    [{"Retry-After": "3600"}, {"Retry-After": in_years(5)}, {"retry-after-ms": "1e12"}],
    ids=["an hour", "a date years ahead", "1e12 ms"],
)
def test_retry_after_beyond_the_cap_fails_without_waiting(
    provider: str, asked: dict[str, str], data_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    limited = Reply(429, error(provider, 429, "Rate limit reached"), asked)
    for api in serve(FakeApi(provider, [limited])):
        spec = api_spec(provider, api.url, max_retries=3, concurrency=1, max_retry_wait_s=2)
        sleeps: list[float] = []
        samples = [prepared(0), prepared(1)]
        preds = run(adapter_for(spec, data_root, sleeps), spec, samples, tmp_path / "p.jsonl")
        assert preds[0].failure is FailureKind.API_ERROR
        assert "max_retry_wait_s" in (preds[0].failure_detail or "")
        assert sleeps == [] and len(api.requests) == 2
        assert preds[1].failure is None and preds[1].response
    assert_no_key(tmp_path, caplog)


@pytest.mark.parametrize("header", ["Retry-After", "retry-after-ms"])
@pytest.mark.parametrize("value", ["nan", "inf", "-5", "soon"])
def test_unusable_retry_after_falls_back_to_backoff(
    provider: str, header: str, value: str, data_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    limited = Reply(503, error(provider, 503, "Overloaded"), {header: value})
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        time.sleep(seconds)

    for api in serve(FakeApi(provider, [limited])):
        spec = api_spec(provider, api.url, max_retries=1, max_retry_wait_s=2)
        adapter = adapter_for(spec, data_root)
        adapter.client.sleep = sleep
        (pred,) = run(adapter, spec, [prepared(0)], tmp_path / "p.jsonl")
        assert pred.failure is None and pred.response
        assert len(sleeps) == 1 and 0.005 <= sleeps[0] <= 0.01, "the first backoff of api_spec"
    assert_no_key(tmp_path, caplog)


@pytest.mark.parametrize("part", ["headers", "body"])
def test_trickling_reply_is_cut_at_the_deadline(
    provider: str, part: str, data_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each byte comes well within timeout_s, but the whole reply would take 2 s."""
    caplog.set_level(logging.DEBUG)
    trickle = Reply(200, success(provider, "late", 1, 1), trickle=part)
    for api in serve(FakeApi(provider, [trickle])):
        spec = api_spec(provider, api.url, max_retries=0, concurrency=1, timeout_s=0.5)
        preds = run(adapter_for(spec, data_root), spec, [prepared(0), prepared(1)], tmp_path / "p.jsonl")
        assert preds[0].failure is FailureKind.TIMEOUT and preds[0].response is None
        assert preds[0].seconds < 1.0
        assert preds[1].failure is None and preds[1].response
    assert_no_key(tmp_path, caplog)


def test_oversized_answer_fails_and_the_job_goes_on(
    provider: str, data_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    huge = Reply(200, success(provider, "A" * 50_000 + SECRET, 1, 1))
    for api in serve(FakeApi(provider, [huge])):
        spec = api_spec(provider, api.url, max_retries=2, concurrency=1, max_response_bytes=16_384)
        preds = run(adapter_for(spec, data_root, []), spec, [prepared(0), prepared(1)], tmp_path / "p.jsonl")
        assert preds[0].failure is FailureKind.API_ERROR and preds[0].response is None
        assert "16384 bytes" in (preds[0].failure_detail or "")
        assert len(api.requests) == 2, "not retried"
        assert preds[1].failure is None and preds[1].response
    assert_no_key(tmp_path, caplog)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(200, {}, raw=b"[]"),
        Reply(200, {}, raw=b'{"choices": [', length=4096),
        Reply(200, {}, raw=b"\x1f\x8b not gzip", headers={"Content-Encoding": "gzip"}),
    ],
    ids=["a JSON list", "a body cut short", "a broken gzip body"],
)
def test_malformed_reply_fails_only_its_sample(
    provider: str, reply: Reply, data_root: Path, tmp_path: Path
) -> None:
    for api in serve(FakeApi(provider, [reply])):
        spec = api_spec(provider, api.url, max_retries=0, concurrency=1)
        preds = run(adapter_for(spec, data_root), spec, [prepared(0), prepared(1)], tmp_path / "p.jsonl")
        assert preds[0].failure is FailureKind.API_ERROR and preds[0].response is None
        assert preds[1].failure is None and preds[1].response


def test_environment_overrides_base_url_and_supplies_key(
    provider: str, api: FakeApi, data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = api_spec(provider, "http://127.0.0.1:9/unreachable", max_retries=0)
    monkeypatch.setenv(URL_ENV[provider], api.url)
    (pred,) = run(adapter_for(spec, data_root), spec, [prepared(0)], tmp_path / "p.jsonl")
    assert pred.failure is None
    monkeypatch.delenv(KEY_ENV[provider])
    with pytest.raises(AdapterError, match=f"set {KEY_ENV[provider]} in the environment"):
        adapter_for(spec, data_root)


def test_limits_and_prices_do_not_enter_the_cache_key(provider: str) -> None:
    spec = api_spec(provider, None)
    tuned = api_spec(provider, None, concurrency=16, requests_per_minute=5)
    assert cache_key(spec, prepared(0), "1") == cache_key(tuned, prepared(0), "1")
    other_model = spec.model_copy(
        update={"weights": spec.weights.model_copy(update={"model_id": "gpt-4-turbo"})}
    )
    assert cache_key(other_model, prepared(0), "1") != cache_key(spec, prepared(0), "1")


def test_shipped_api_specs_resolve_to_adapters() -> None:
    specs = load_specs(DEFAULT_SPECS)
    for name in ("gpt-4o", "gpt-4v", "claude-3-opus", "gemini-1.0", "gemini-1.5"):
        assert issubclass(adapter_class(specs.models[name]), ApiAdapter)
