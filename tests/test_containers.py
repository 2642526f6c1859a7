"""Container images and the Docker runtime: pure parts without an engine, one real run with one.

The ``docker`` test builds the kit image on the local base that ``.ci/docker-setup.sh`` makes and
checks that ``infer`` inside the container answers exactly as on the host; it skips, saying why,
when no engine answers.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import requests
import yaml
from docker.errors import ImageNotFound
from mini_specs import task_spec

from milebench import cli
from milebench.benchmarks.milebench.containers import container_family, local_data
from milebench.benchmarks.milebench.paper import ContaminationTable, ImageQuantityTable, MainTable, PaperSpec
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import Group, QuestionType, ScorerKind
from milebench.containers import docker_runtime, image
from milebench.containers.docker_runtime import (
    ContainerFailed,
    ContainerSpec,
    Terminated,
    create_kwargs,
    device_requests,
    job_spec,
    run_container,
)
from milebench.containers.image import ImageError, ImageRecord, build_image
from milebench.infer.registry import ADAPTERS, adapter_environment, load_adapter
from milebench.io import atomic_write_jsonl, read_jsonl
from milebench.spec.base import SpecError
from milebench.spec.model import ModelSpec

REPO = Path(__file__).resolve().parents[1]
FAMILIES = tuple(
    sorted(p.parent.name for p in (REPO / "containers").glob("*/Dockerfile") if p.parent.name != "vllm")
)
"""Every family image but vllm's, whose lock is built apart (containers/README.md)."""
LOCAL_BASE = "milebench-base:bookworm"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
SECRET = "sk-do-not-log-0123456789"


def model(name: str = "random", container: str | None = "kit", **kw: Any) -> ModelSpec:
    fields: dict[str, Any] = {
        "name": name,
        "display_name": name,
        "section": "baseline",
        "adapter": "random",
        "weights": {"kind": "builtin"},
        "container": container,
    }
    fields.update(kw)
    return ModelSpec.model_validate(fields)


def api_model() -> ModelSpec:
    return model(
        "gpt-x",
        container="api",
        section="closed",
        adapter="openai-chat",
        weights={"kind": "api", "provider": "openai", "model_id": "gpt-x"},
        notes="context length unknown",
    )


# --- Dockerfiles and locks --------------------------------------------------------------------


@pytest.mark.parametrize("name", FAMILIES)
def test_family_dockerfile_is_pinned_hashed_and_weightless(name: str) -> None:
    fam = image.family(name, REPO)
    text = fam.dockerfile.read_text()
    assert re.fullmatch(r"[\w./:-]+@sha256:[0-9a-f]{64}", image.default_base(fam.dockerfile))
    assert re.search(r"^FROM \$\{BASE\}$", text, re.MULTILINE)
    assert "ARG EXTRA_CA_BUNDLE=" in text and "PIP_CERT=" in text and "SSL_CERT_FILE=" in text
    assert f"COPY containers/{name}/requirements.lock" in text
    assert "pip install --require-hashes --no-deps -r" in text
    assert "HF_HOME=/models" in text and 'VOLUME ["/models"]' in text
    assert re.search(r"^USER milebench$", text, re.MULTILINE)
    assert 'ENTRYPOINT ["python", "-m", "milebench"]' in text


@pytest.mark.parametrize("name", FAMILIES)
def test_family_lock_pins_every_requirement_with_a_hash(name: str) -> None:
    text = image.family(name, REPO).lock.read_text()
    blocks = re.findall(
        r"^([A-Za-z0-9_.-]+)==(\S+) \\\n((?:\s+--hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", text, re.M
    )
    pinned = {pkg.lower(): version for pkg, version, _ in blocks}
    requirement_lines = [ln for ln in text.splitlines() if re.match(r"^[A-Za-z0-9]", ln)]
    assert len(blocks) == len(requirement_lines) > 0
    assert pinned["rouge"] == "1.0.1" and "pydantic" in pinned and "setuptools" in pinned
    paper_era = ("llava15", "qwen-vl-chat", "minigpt-v2", "llama-vid", "cheetor", "video-llama-2", "valley")
    if name in (*paper_era, "videochat2", "lwm"):
        assert pinned["transformers"] == "4.37.2" and pinned["torch"] == "2.1.2"
        assert pinned["numpy"].startswith("1.")
    if name == "qwen-vl-chat":
        assert pinned["torchvision"] == "0.16.2" and {"tiktoken", "einops"} <= set(pinned)
    if name == "lwm":
        assert pinned["jax"] == pinned["jaxlib"] == "0.4.23" and {"flax", "tux", "msgpack"} <= set(pinned)
    if name == "hf-current":
        assert "torch" in pinned and "transformers" in pinned


OUTSIDE_KIT = {
    "docker": "image builds and container starts run on the host, beside the engine",
    "torch": "tiny models, the HF adapters and the MiniLM embedder run in the torch families",
    "sentence_transformers": "the MiniLM embedder needs torch",
    "rocrate": "milebench archive and verify run on the host, beside the engine",
    "cyclonedx": "the SBOM tool is mounted into each image for one run, never installed in it",
    "vllm": "the vllm execution backend runs in its own family image (containers/vllm)",
    "sentencepiece": "MiniGPT-v2's tiny and LWM's tokenizers are SentencePiece, read in the torch families",
    "msgpack": "LWM's params are tux's streaming msgpack, read in its family image (containers/lwm)",
    "open_flamingo": "OpenFlamingo's original code runs in its family image (containers/open-flamingo)",
    "open_clip": "OpenFlamingo's vision encoder, installed with it in containers/open-flamingo",
}
"""Libraries the package imports that the kit image leaves out, and why."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_libraries() -> dict[str, set[str]]:
    """Top-level third-party modules the package imports anywhere (inside functions too) -> importers."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "milebench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {name.split(".")[0] for name in names}:
                if top not in sys.stdlib_module_names and top != "milebench":
                    found.setdefault(top, set()).add(path.relative_to(REPO).as_posix())
    return found


def test_kit_lock_carries_every_library_the_kit_imports_outside_the_model_families() -> None:
    """Every rule but a model's inference runs in the kit image (fetch, preprocess, score, aggregate,
    report, MMLongEmbed's BM25, evaluation and report): what any of them imports must be locked there."""
    pinned = {
        canonical(n)
        for n in re.findall(r"^([A-Za-z0-9_.-]+)==", image.family("kit", REPO).lock.read_text(), re.M)
    }
    distributions = importlib.metadata.packages_distributions()
    missing = {
        module: sorted(importers)
        for module, importers in imported_libraries().items()
        if module not in OUTSIDE_KIT
        and not {canonical(d) for d in distributions.get(module, [module])} & pinned
    }
    assert missing == {}
    assert {"transformers", "tokenizers", "rouge-score", "matplotlib", "scipy", "requests", "bm25s"} <= pinned


def test_unknown_family_names_the_known_ones() -> None:
    with pytest.raises(ImageError, match=r"'nope'.*families: .*kit"):
        image.family("nope", REPO)


# --- build inputs, record and no-op logic -------------------------------------------------------


def test_build_args_only_override_what_was_asked() -> None:
    assert image.build_args(None, with_ca_bundle=False) == {}
    assert image.build_args("b:1", with_ca_bundle=True) == {"BASE": "b:1", "EXTRA_CA_BUNDLE": "extra-ca.pem"}


def test_build_key_changes_with_every_input() -> None:
    inputs = ("d", "l", "s", "base", "id")
    key = image.build_key(*inputs)
    assert image.build_key(*inputs) == key
    for i in range(len(inputs)):
        changed = list(inputs)
        changed[i] = "other"
        assert image.build_key(*changed) != key
    assert image.build_key("d", "l", "s", "base", None) != key


def fake_checkout(root: Path) -> Path:
    """A checkout with one family, the package and junk that must stay out of contexts and hashes."""
    (root / "containers" / "kit").mkdir(parents=True)
    (root / "containers" / "kit" / "Dockerfile").write_text(
        "ARG BASE=img@sha256:" + "a" * 64 + "\nFROM ${BASE}\n"
    )
    (root / "containers" / "kit" / "requirements.lock").write_text("rouge==1.0.1 \\\n    --hash=sha256:00\n")
    (root / "containers" / "no-extra-ca.pem").write_text("# none\n")
    (root / "pyproject.toml").write_text("[project]\nname='x'\n")
    (root / "setup.py").write_text("import setuptools\n")
    (root / "README.md").write_text("readme\n")
    (root / "specs").mkdir()
    (root / "specs" / "__init__.py").write_text("")
    (root / "milebench" / "__pycache__").mkdir(parents=True)
    (root / "milebench" / "__init__.py").write_text("")
    (root / "milebench" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (root / "results").mkdir()
    (root / "results" / "big.bin").write_bytes(b"\0" * 10)
    return root


def test_source_hash_follows_the_package_not_caches_or_readme(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path)
    first = image.source_sha256(root)
    (root / "milebench" / "__pycache__" / "y.pyc").write_bytes(b"1")
    (root / "README.md").write_text("edited\n")
    assert image.source_sha256(root) == first
    (root / "milebench" / "__init__.py").write_text("X = 1\n")
    assert image.source_sha256(root) != first
    (root / "milebench" / "__init__.py").write_text("")
    (root / "milebench" / "__init__.py").rename(root / "milebench" / "other.py")
    assert image.source_sha256(root) != first


def test_source_hash_follows_package_data_but_not_the_default_specs(tmp_path: Path) -> None:
    """Templates and fonts are part of what a job in the image does; the specs are mounted by --specs."""
    root = fake_checkout(tmp_path)
    (root / "specs" / "runs").mkdir(parents=True)
    (root / "specs" / "runs" / "smoke.yaml").write_text("name: smoke\n")
    first = image.source_sha256(root)
    (root / "specs" / "runs" / "smoke.yaml").write_text("name: smoke  # edited\n")
    (root / "specs" / "paper.yaml").write_text("new: 1\n")
    assert image.source_sha256(root) == first
    (root / "milebench" / "report" / "templates").mkdir(parents=True)
    (root / "milebench" / "report" / "templates" / "report.html.j2").write_text("{{ report }}\n")
    assert image.source_sha256(root) != first


def test_context_holds_only_the_package_family_and_ca(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path / "repo")
    ca = tmp_path / "corp.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    image.prepare_context(image.family("kit", root), ca, ctx)
    files = sorted(p.relative_to(ctx).as_posix() for p in ctx.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "containers/kit/Dockerfile",
        "containers/kit/requirements.lock",
        "containers/no-extra-ca.pem",
        "extra-ca.pem",
        "milebench/__init__.py",
        "pyproject.toml",
        "setup.py",
        "specs/__init__.py",
    ]
    assert (ctx / "extra-ca.pem").read_text() == ca.read_text()
    with pytest.raises(ImageError, match=r"missing\.pem not found"):
        image.prepare_context(image.family("kit", root), tmp_path / "missing.pem", tmp_path / "ctx2")


class FakeImages:
    def __init__(self, known: dict[str, str]):
        self.known = known

    def get(self, ref: str) -> Any:
        if ref not in self.known:
            raise ImageNotFound(ref)
        return type("Img", (), {"id": self.known[ref]})()


class FakeApi:
    def __init__(self, images: FakeImages):
        self.images = images
        self.calls: list[dict[str, Any]] = []

    def build(self, **kw: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kw)
        assert (Path(kw["path"]) / kw["dockerfile"]).is_file()
        image_id = f"sha256:{len(self.calls):064x}"
        self.images.known[image_id] = image_id
        yield {"stream": "Step 1/2 : FROM x\n"}
        yield {"aux": {"ID": image_id}}
        yield {"stream": "Successfully built\n"}


class FakeEngine:
    def __init__(self) -> None:
        self.images = FakeImages({"base:1": "sha256:base"})
        self.api = FakeApi(self.images)


def test_identical_rebuild_is_a_noop_until_an_input_or_the_image_changes(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path / "repo")
    records = tmp_path / "records"
    engine = FakeEngine()
    build = lambda: build_image("kit", base="base:1", root=root, records=records, client=engine)  # noqa: E731

    first = build()
    call = engine.api.calls[0]
    assert call["network_mode"] == "host" and call["rm"] is True
    assert call["dockerfile"] == "containers/kit/Dockerfile" and call["buildargs"] == {"BASE": "base:1"}
    saved = ImageRecord.model_validate_json((records / "kit.json").read_text())
    assert (
        saved == first and first.base_id == "sha256:base" and first.built_at.utcoffset().total_seconds() == 0
    )

    assert build() == first and len(engine.api.calls) == 1

    del engine.images.known[first.image_id]  # pruned from the engine
    second = build()
    assert len(engine.api.calls) == 2 and second.image_id != first.image_id

    (root / "containers" / "kit" / "requirements.lock").write_text("rouge==1.0.1 \\\n    --hash=sha256:11\n")
    third = build()
    assert len(engine.api.calls) == 3 and third.lock_sha256 != second.lock_sha256

    engine.images.known["base:1"] = "sha256:base-repulled"
    build()
    assert len(engine.api.calls) == 4


def test_recorded_image_refuses_missing_and_stale_records(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path / "repo")
    records = tmp_path / "records"
    engine = FakeEngine()
    with pytest.raises(ImageError, match="milebench image build --family kit"):
        image.recorded_image("kit", root=root, records=records, client=engine)
    built = build_image("kit", base="base:1", root=root, records=records, client=engine)
    assert image.recorded_image("kit", root=root, records=records, client=engine) == built
    (root / "milebench" / "__init__.py").write_text("CHANGED = True\n")
    with pytest.raises(ImageError, match="stale"):
        image.recorded_image("kit", root=root, records=records, client=engine)


def test_build_error_and_unreadable_record(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ImageError, match=r"kit.*failed: pip exploded"):
        image.stream_build(iter([{"stream": "Step 1\n"}, {"error": "pip exploded\n"}]), "kit")
    with caplog.at_level(logging.INFO):
        assert (
            image.stream_build(iter([{"stream": "a\nb\n"}, {"aux": {"ID": "sha256:1"}}]), "kit") == "sha256:1"
        )
    assert "[build kit] a" in caplog.text and "[build kit] b" in caplog.text
    bad = tmp_path / "kit.json"
    bad.write_text("{not json")
    assert image.read_record(bad) is None


# --- runtime: the container spec ---------------------------------------------------------------


def spec_for(m: ModelSpec, tmp_path: Path, **kw: Any) -> ContainerSpec:
    for sub in ("specs", "out", "hf"):
        (tmp_path / sub).mkdir(exist_ok=True)
    return job_spec(
        image="sha256:abc",
        model=m,
        command=("infer", "--run", "r"),
        specs_root=tmp_path / "specs",
        writable=(tmp_path / "out",),
        model_cache=tmp_path / "hf",
        workdir=tmp_path,
        **kw,
    )


def test_local_model_gets_no_network_and_only_its_output_writable(tmp_path: Path) -> None:
    spec = spec_for(model(), tmp_path)
    kw = create_kwargs(spec, {"OPENAI_API_KEY": SECRET, "PATH": "/bin", "AWS_SECRET": "x"})
    mounts = {m["Target"]: (m["Source"], m["ReadOnly"], m["Type"]) for m in kw["mounts"]}
    here = str(tmp_path.resolve())
    assert mounts == {
        f"{here}/specs": (f"{here}/specs", True, "bind"),
        f"{here}/out": (f"{here}/out", False, "bind"),
        "/models": (f"{here}/hf", True, "bind"),
    }
    assert kw["network_mode"] == "none" and kw["device_requests"] == [] and kw["detach"] is True
    assert kw["shm_size"] == "2g", "Docker's 64 MiB /dev/shm is too small for vLLM's engine processes"
    assert kw["environment"] == {
        "HF_HOME": "/models",
        "HOME": "/tmp",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    assert kw["command"] == ["--specs", f"{here}/specs", "infer", "--run", "r"] and kw["working_dir"] == here


def test_api_model_gets_network_and_only_its_own_keys(tmp_path: Path) -> None:
    spec = spec_for(api_model(), tmp_path, api_network="host")
    environ = {"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": "a", "UNKNOWN_TOKEN": "u", "HTTPS_PROXY": "p"}
    env = create_kwargs(spec, environ)["environment"]
    assert env["OPENAI_API_KEY"] == SECRET and env["HTTPS_PROXY"] == "p"
    assert "ANTHROPIC_API_KEY" not in env and "UNKNOWN_TOKEN" not in env and "HF_HUB_OFFLINE" not in env
    assert spec.network_mode == "host"
    assert SECRET not in repr(spec) and SECRET not in docker_runtime.describe(spec, environ)


def test_local_data_tree_is_mounted_read_only_at_its_resolved_path(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "tree")
    run = RunSpec(
        name="r", description="r", models=("random",), data={"kind": "local", "path": str(tmp_path / "link")}
    )
    (tree,) = local_data(run)
    assert tree == (tmp_path / "tree").resolve()
    fixture_run = run.model_copy(update={"data": FixtureSource(kind="fixture")})
    assert local_data(fixture_run) == ()
    mounts = create_kwargs(spec_for(model(), tmp_path, readable=(tree,)), {})["mounts"]
    assert {m["Target"]: m["ReadOnly"] for m in mounts}[str(tree)] is True


def test_gpu_requests() -> None:
    assert device_requests(None) == []
    (every,) = device_requests("all")
    assert every["Count"] == -1 and every["Capabilities"] == [["gpu"]]
    (some,) = device_requests("0, 2")
    assert some["DeviceIDs"] == ["0", "2"]


def test_model_without_container_is_a_spec_error_naming_its_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"models/random\.yaml: container: null"):
        container_family(model(container=None), tmp_path)
    assert container_family(model(), tmp_path) == "kit"


def test_cli_wiring() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["image", "build", "--family", "kit", "--ca-bundle", "/x.pem"])
    assert args.target == "milebench.containers.commands:image_build"
    assert (args.family, args.base, args.ca_bundle) == ("kit", None, Path("/x.pem"))
    args = parser.parse_args(["container-infer", "--model", "m", "--task", "T", "--mode", "multi-image"])
    assert args.target == "milebench.benchmarks.milebench.containers:container_infer"
    assert (args.runtime, args.gpus, args.api_network, args.mode) == (
        "docker",
        None,
        "bridge",
        Mode.MULTI_IMAGE,
    )
    args = parser.parse_args(
        ["container-infer", "--model", "m", "--task", "T", "--task", "U", "--mode", "adversarial"]
    )
    assert args.task == ["T", "U"], "the tasks one load answers"


# --- runtime: cleanup ---------------------------------------------------------------------------


class FakeContainer:
    short_id = "c0ffee"

    def __init__(self, exit_code: int = 0, during_logs: Any = None, slow_removal: bool = False):
        self.exit_code = exit_code
        self.during_logs = during_logs
        self.slow_removal = slow_removal
        self.events: list[str] = []

    def start(self) -> None:
        self.events.append("start")

    def logs(self, stream: bool, follow: bool) -> Iterator[bytes]:
        yield b"first line\nsecond "
        if self.during_logs is not None:
            self.during_logs()
        yield b"half\n"

    def wait(self) -> dict[str, int]:
        self.events.append("wait")
        return {"StatusCode": self.exit_code}

    def stop(self, timeout: int) -> None:
        self.events.append("stop")

    def remove(self, force: bool, v: bool) -> None:
        self.events.append("remove")
        if self.slow_removal:  # what the SDK raises when the engine does not answer within its timeout
            raise requests.exceptions.ReadTimeout("UnixHTTPConnectionPool: Read timed out. (read timeout=60)")


class FakeClient:
    def __init__(self, container: FakeContainer):
        self.container = container
        self.created: list[dict[str, Any]] = []
        self.containers = self

    def create(self, **kw: Any) -> FakeContainer:
        self.created.append(kw)
        return self.container


def test_success_streams_logs_and_removes_without_logging_secrets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    box = FakeContainer()
    client = FakeClient(box)
    with caplog.at_level(logging.DEBUG):
        run_container(client, spec_for(api_model(), tmp_path), {"OPENAI_API_KEY": SECRET})
    assert box.events == ["start", "wait", "stop", "remove"]
    assert "[c0ffee] first line" in caplog.text and "[c0ffee] second half" in caplog.text
    assert "OPENAI_API_KEY" in caplog.text and SECRET not in caplog.text
    assert client.created[0]["environment"]["OPENAI_API_KEY"] == SECRET


class ReadsRecorded(dict[str, str]):
    """An environment that remembers every name looked up in it."""

    def __init__(self, values: dict[str, str]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


API_KINDS = [kind for kind, target in ADAPTERS.items() if target.startswith("milebench.infer.api.")]


@pytest.mark.parametrize("kind", API_KINDS, ids=str)
def test_every_variable_an_api_adapter_reads_reaches_its_container_unlogged(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    module_name, class_name = ADAPTERS[kind].split(":")
    provider = getattr(importlib.import_module(module_name), class_name).provider
    m = model(
        f"{kind}-model",
        container="api",
        section="closed",
        adapter=kind,
        weights={"kind": "api", "provider": provider, "model_id": "m"},
        notes="context length unknown",
    )
    declared = adapter_environment(m)
    values = {name: f"{name}={SECRET}" for name in declared} | {"UNRELATED_TOKEN": SECRET + "-other"}
    environ = ReadsRecorded(values)
    with monkeypatch.context() as patch:
        patch.setattr(os, "environ", environ)
        adapter = load_adapter(m, RunPaths(out=tmp_path / "out", reports=tmp_path / "reports"), tmp_path)
    url_var = type(adapter).url_env
    assert {type(adapter).key_env, url_var} <= environ.read <= set(declared)
    assert adapter.base_url == values[url_var]  # the base URL the container gets is the one it uses

    spec = spec_for(m, tmp_path)
    client = FakeClient(FakeContainer())
    with caplog.at_level(logging.DEBUG):
        run_container(client, spec, values)
    passed = client.created[0]["environment"]
    assert {name: passed.get(name) for name in environ.read} == {name: values[name] for name in environ.read}
    assert set(declared) <= set(passed) and "UNRELATED_TOKEN" not in passed
    assert SECRET not in caplog.text and SECRET not in repr(spec)
    assert all(name in caplog.text for name in declared)


def test_adapters_of_local_weights_read_no_variable_and_get_none(tmp_path: Path) -> None:
    """Their modules never look at the environment (their libraries' settings are the runtime's fixed
    ones), so the runtime neither imports them to ask nor passes them anything."""
    for kind, target in ADAPTERS.items():
        if kind in API_KINDS:
            continue
        module = importlib.util.find_spec(target.split(":")[0])
        assert module is not None and module.origin is not None
        source = Path(module.origin).read_text(encoding="utf-8")
        assert "environ" not in source and "getenv" not in source, target
    local = model(
        "tiny", adapter="hf-llava", weights={"kind": "tiny", "family": "llava"}, notes="window unset"
    )
    assert adapter_environment(local) == ()
    assert create_kwargs(spec_for(local, tmp_path), {"OPENAI_API_KEY": SECRET})["environment"].keys() == {
        "HF_HOME",
        "HOME",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
    }


def test_failure_raises_the_exit_code_and_removes(tmp_path: Path) -> None:
    box = FakeContainer(exit_code=3)
    with pytest.raises(ContainerFailed) as err:
        run_container(FakeClient(box), spec_for(model(), tmp_path), {})
    assert err.value.exit_code == 3 and "exited with code 3" in str(err.value)
    assert box.events[-2:] == ["stop", "remove"]


def test_a_removal_the_engine_is_slow_to_answer_does_not_fail_a_finished_job(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    box = FakeContainer(slow_removal=True)
    run_container(FakeClient(box), spec_for(model(), tmp_path), {})
    assert box.events == ["start", "wait", "stop", "remove"]
    assert "removing container c0ffee: the engine did not answer" in caplog.text
    failed = FakeContainer(exit_code=3, slow_removal=True)
    with pytest.raises(ContainerFailed):  # the command's own failure still fails the job
        run_container(FakeClient(failed), spec_for(model(), tmp_path), {})


def test_interrupt_removes(tmp_path: Path) -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt

    box = FakeContainer(during_logs=interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_container(FakeClient(box), spec_for(model(), tmp_path), {})
    assert box.events == ["start", "stop", "remove"]


def test_sigterm_becomes_an_exception_that_removes_and_the_handler_is_restored(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    box = FakeContainer(during_logs=lambda: os.kill(os.getpid(), signal.SIGTERM))
    with pytest.raises(Terminated):
        run_container(FakeClient(box), spec_for(model(), tmp_path), {})
    assert box.events == ["start", "stop", "remove"]
    assert signal.getsignal(signal.SIGTERM) is before


# --- the engine setup script ----------------------------------------------------------------------


def test_setup_script_reports_an_engine_that_cannot_start_and_exits_zero(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("docker", "dockerd", "debootstrap"):
        (fake / tool).write_text("#!/bin/sh\nexit 1\n")
        (fake / tool).chmod(0o755)
    env = os.environ | {
        "PATH": f"{fake}:{os.environ['PATH']}",
        "WAIT_S": "1",
        "DOCKERD_LOG": str(tmp_path / "log"),
    }
    done = subprocess.run(
        ["bash", str(REPO / ".ci" / "docker-setup.sh")], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert re.search(r"^docker: unavailable \(.+\)$", done.stdout, re.M)


# --- against a real engine ----------------------------------------------------------------------


def engine_or_skip() -> docker.DockerClient:
    if shutil.which("docker") is None:
        pytest.skip("docker: no docker CLI on this machine (run .ci/docker-setup.sh)")
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
    if info.returncode != 0:
        pytest.skip(
            f"docker: no engine answers `docker info` (run .ci/docker-setup.sh): {info.stderr[-200:]}"
        )
    client = docker.from_env()
    try:
        client.images.get(LOCAL_BASE)
    except ImageNotFound:
        pytest.skip(f"docker: base image {LOCAL_BASE} missing (run .ci/docker-setup.sh)")
    return client


@pytest.mark.docker
def test_engine_calls_may_outlast_a_slow_storage_driver() -> None:
    """Creating or removing a container under vfs copies or deletes a whole file system: minutes, not
    the SDK's 60 s; the client the commands use waits for that."""
    engine_or_skip()
    assert image.API_TIMEOUT_S >= 300
    client = image.client_from_env()  # the SDK asks the engine its API version: it needs one
    assert client.api.timeout == image.API_TIMEOUT_S


def write_yaml(path: Path, spec: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False))


def write_specs(root: Path, out: Path) -> None:
    """Specs on disk (the container reads them): one task, random in the kit image, two runs."""
    write_yaml(
        root / "tasks" / "WebQA.yaml",
        task_spec("WebQA", Group.S1, QuestionType.MULTI_CHOICE, ScorerKind.CHOICE, n_samples=4),
    )
    write_yaml(root / "models" / "random.yaml", model(notes="random baseline"))
    for name in ("host", "box"):
        run = RunSpec(
            name=name,
            description=name,
            models=("random",),
            data=FixtureSource(kind="fixture"),
            output_dir=str(out / name),
        )
        write_yaml(root / "runs" / f"{name}.yaml", run)
    paper = PaperSpec(
        source="t",
        main_table=MainTable(caption="", rows=()),
        contamination=ContaminationTable(caption="", rows=()),
        image_quantity=ImageQuantityTable(note="", rows=()),
    )
    write_yaml(root / "paper.yaml", paper)


def prepared_samples() -> list[dict[str, Any]]:
    rows = []
    for i in range(4):
        choices = ("cat", "dog", "cow", "pig") if i < 3 else None
        rows.append(
            PreparedSample(
                task="WebQA",
                mode=Mode.MULTI_IMAGE,
                sample_id=i,
                instruction="Answer.",
                context=f"<ImageHere>question {i}",
                images=(f"WebQA/images/{i}.png",),
                image_sha256=(f"{i:064x}",),
                prompt_sha256=f"{i + 100:064x}",
                question_type="multi-choice" if choices else "open-ended",
                choices=choices,
                response="dog" if choices else "gold",
                image_quantity_level="Few",
                n_images=1,
            ).model_dump(mode="json")
        )
    return rows


@pytest.mark.docker
def test_kit_image_infers_exactly_as_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = engine_or_skip()
    monkeypatch.chdir(tmp_path)
    ca = HOST_CA if HOST_CA.is_file() else None
    built = build_image("kit", base=LOCAL_BASE, ca_bundle=ca, client=client)
    assert Path("results/images/kit.json").is_file()
    again = build_image("kit", base=LOCAL_BASE, ca_bundle=ca, client=client)
    assert again == built  # identical inputs: no rebuild, record untouched

    specs, out = tmp_path / "specs", tmp_path / "out"
    write_specs(specs, out)
    for run in ("host", "box"):
        atomic_write_jsonl(
            RunPaths(out=out / run, reports=tmp_path).prepared("WebQA", "multi-image"), prepared_samples()
        )
    cell = ["--model", "random", "--task", "WebQA", "--mode", "multi-image"]
    assert cli.main(["--specs", str(specs), "infer", "--run", "host", *cell]) == 0
    assert cli.main(["--specs", str(specs), "container-infer", "--run", "box", *cell]) == 0

    def answers(run: str) -> list[tuple[int, str | None, str]]:
        path = RunPaths(out=out / run, reports=tmp_path).predictions("random", "WebQA", "multi-image")
        return [(r["sample_id"], r["response"], r["cache_key"]) for r in read_jsonl(path)]

    host = answers("host")
    assert [sid for sid, _, _ in host] == [0, 1, 2, 3] and host[3][1] == ""
    assert answers("box") == host

    # A job failing inside the image (a malformed prepared file) returns its exit code and leaves no
    # container behind; a missing prepared file is refused on the host before any container starts.
    failing = ["--model", "random", "--task", "WebQA", "--mode", "adversarial"]
    assert cli.main(["--specs", str(specs), "container-infer", "--run", "box", *failing]) == 1
    bad = RunPaths(out=out / "box", reports=tmp_path).prepared("WebQA", "adversarial")
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text('{"task": "WebQA"}\n', encoding="utf-8")
    assert cli.main(["--specs", str(specs), "container-infer", "--run", "box", *failing]) != 0
    left = client.containers.list(all=True, filters={"label": "org.milebench.run=box"})
    assert left == []
    assert json.loads(Path("results/images/kit.json").read_text())["image_id"] == built.image_id
