"""A real Hugging Face hub for tests: olah (``.ci/hub-setup.sh``) in offline mode, serving git repositories
built here in the hub's shape, on a free port of 127.0.0.1.

The repositories are what the hub holds: the dataset ``FreedomIntelligence/MileBench`` with the
mini-MileBench packed as the upstream ``MileBench_part*.tar.gz`` (large files in git-lfs, as on the hub),
and one model repository per tiny checkpoint, built by the kit's tiny builders (weights in git-lfs): the
smoke run's and those of the ported families whose paper model loads from the hub (``ported_hub_models``).
olah names each revision by its real git commit. A repository that olah's proxy rules deny answers 401,
as the hub answers a client without access.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from milebench.benchmarks.milebench.fixture.generate import write_tree
from milebench.benchmarks.milebench.fixture.pack import pack_mirror
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.infer.adapter import AdapterError
from milebench.infer.tiny import build_tiny
from milebench.spec.model import HubWeights, ModelSpec, TinyWeights

REPO = Path(__file__).resolve().parents[1]
OLAH = REPO / ".venv-olah" / "bin" / "olah-cli"
DATASET = "FreedomIntelligence/MileBench"
MODEL_ORG = "milebench-kit"
DENIED = f"{MODEL_ORG}/denied"
"""A model repository that exists in the mirror but that olah refuses to serve (401)."""
START_TIMEOUT_S = 60.0
GIT_ENV = {
    "GIT_AUTHOR_NAME": "kit",
    "GIT_AUTHOR_EMAIL": "kit@localhost",
    "GIT_COMMITTER_NAME": "kit",
    "GIT_COMMITTER_EMAIL": "kit@localhost",
}


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def commit(repo: Path, message: str) -> str:
    """Commit everything in ``repo``'s work tree on ``main``; returns the commit sha."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def hub_repo(folder: Path, files: Path, large: tuple[str, ...]) -> str:
    """A git repository on branch ``main`` holding the files of ``files``, those matching ``large`` in
    git-lfs; returns its first commit."""
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    git(folder, "lfs", "install", "--local")
    for pattern in large:
        git(folder, "lfs", "track", pattern)
    shutil.copytree(files, folder, dirs_exist_ok=True)
    return commit(folder, "initial upload")


def mirror_path(mirrors: Path, kind: str, repo_id: str) -> Path:
    """Where olah looks for a repository: ``<mirrors>/<models|datasets>/<org>/<name>``."""
    return mirrors / kind / repo_id


def model_repo_id(spec: ModelSpec) -> str:
    return f"{MODEL_ORG}/{spec.name}"


PORTS_RUN = "ports"
"""The run of the ported families' tiny checkpoints."""
LARGE_FILES = ("*.safetensors", "*.bin", "*.pth", "*.pt", "params", "vqgan")
"""Weight files, committed to git-lfs as the hub stores them (LWM's ``params`` and ``vqgan`` have no
extension)."""


def ported_hub_models(specs: Specs) -> list[ModelSpec]:
    """The tiny checkpoints of the ports run whose family's paper models (the same adapter, real weights)
    load from the hub: a hub repository stands in for those. Families whose checkpoints are files
    fetched from URLs (``kind: url``) are not among them."""
    tiny = [m for m in specs.run_models(specs.run(PORTS_RUN)) if isinstance(m.weights, TinyWeights)]
    paper = [m for m in specs.models.values() if not isinstance(m.weights, TinyWeights)]
    return [
        t
        for t in tiny
        if (family := [m for m in paper if m.adapter == t.adapter])
        and all(isinstance(m.weights, HubWeights) for m in family)
    ]


KIT_BESIDE = sorted(REPO.glob(".venv-*-kit"))
"""The kit installed beside a family's original code (``.ci/*-kit.sh``, e.g. OpenFlamingo's, whose code
does not import under the kit's transformers): where that family's tiny checkpoint is built."""


def write_tiny(spec: ModelSpec, out: Path) -> None:
    """``spec``'s tiny checkpoint in ``out``: built here, or, where its family's original code is not
    importable here, by ``milebench tiny-model`` in a virtualenv of the kit beside that code. Raises
    AdapterError naming what is missing where neither can build it."""
    try:
        build_tiny(spec, out)
        return
    except AdapterError as error:
        here = error
        shutil.rmtree(out, ignore_errors=True)  # what the builder wrote before it stopped
    for venv in KIT_BESIDE:
        with tempfile.TemporaryDirectory(prefix="tiny-beside-") as tmp:
            done = subprocess.run(
                [str(venv / "bin" / "python"), "-m", "milebench", "tiny-model", "--run", PORTS_RUN,
                 "--root", tmp, "--model", spec.name],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode == 0:
                paths = RunPaths.for_run(load_specs().run(PORTS_RUN), base=Path(tmp))
                shutil.copytree(paths.model_dir(spec.name), out)
                return
    raise here


def build_mirrors(
    mirrors: Path, tasks: list[TaskSpec], seed: int, samples_per_task: int, tiny: list[ModelSpec]
) -> dict[str, str]:
    """The dataset repository and one model repository per tiny spec (and the denied one); returns the
    tiny specs whose checkpoint could not be built here, with the reason."""
    with tempfile.TemporaryDirectory(prefix="hub-build-") as tmp:
        scratch = Path(tmp)
        dataset = scratch / "dataset"
        tree = write_tree(scratch / "tree", tasks, seed, samples_per_task)
        pack_mirror(tree, dataset, seed=seed)
        (dataset / "milebench.lock.yaml").unlink()  # the hub holds the archives only
        (dataset / "README.md").write_text(
            "# MileBench\n\nThe mini-MileBench, packed as the upstream archives.\n"
        )
        hub_repo(mirror_path(mirrors, "datasets", DATASET), dataset, ("*.tar.gz",))
        unbuilt: dict[str, str] = {}
        for spec in tiny:
            weights = scratch / spec.name
            try:
                write_tiny(spec, weights)
            except AdapterError as error:
                unbuilt[spec.name] = str(error)
                continue
            hub_repo(mirror_path(mirrors, "models", model_repo_id(spec)), weights, LARGE_FILES)
        shutil.copytree(
            mirror_path(mirrors, "models", model_repo_id(tiny[0])), mirror_path(mirrors, "models", DENIED)
        )
    return unbuilt


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CONFIG = """\
[basic]
host = "127.0.0.1"
port = {port}
repos-path = "{repos}"
mirrors-path = ["{mirrors}"]

[accessibility]
offline = true

[[accessibility.proxy]]
repo = "*/*"
allow = true

[[accessibility.proxy]]
repo = "{denied}"
allow = false
"""


@dataclass
class Olah:
    """One olah server over ``mirrors``, started and stopped by the test session."""

    mirrors: Path
    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    unbuilt: dict[str, str] = field(default_factory=dict)
    """Tiny models without a repository: their checkpoint cannot be built here (``build_mirrors``)."""

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / "olah.log"

    def start(self) -> Olah:
        self.port = free_port()
        config = self.workdir / "olah.toml"
        config.write_text(
            CONFIG.format(port=self.port, repos=self.workdir / "cache", mirrors=self.mirrors, denied=DENIED)
        )
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [str(OLAH), "-c", str(config)], cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"olah exited with {self.process.returncode}: {self.log.read_text()[-2000:]}"
                )
            try:
                requests.get(f"{self.endpoint}/api/datasets/{DATASET}/revision/main", timeout=2)
                return self
            except requests.ConnectionError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"olah did not answer on {self.endpoint} within {START_TIMEOUT_S:g} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
