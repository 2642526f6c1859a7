"""Session fixtures, made once for every test file that needs them: the small runs through Snakemake that
several test files read (``pipeline_runs``); for the Docker tests the kit image and a CPU build of
hf-current, and a run whose every job ran in them (Docker builds and container starts are slow: minutes
each on a vfs engine); for the hub tests a real hub server. And the CPU thread settings, which a stage run
in-process changes (``--threads``): kept per test, and fixed for the parity tests.

The Docker and hub helpers (which import transformers) are imported by the fixtures that use them, so a
test file that needs neither is collected without them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pipeline_runs import (
    AUDITED_MODELS,
    AUDITED_RUN,
    E2E_MODELS,
    E2E_RUN,
    E2E_TASKS,
    archive,
    audited_snakemake,
    snakemake,
    write_run,
)
from unavailable import unavailable

from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import FixtureSource
from milebench.infer.threads import THREAD_VARIABLES
from milebench.spec.model import TinyWeights

if TYPE_CHECKING:
    from docker_runs import BoxedRun
    from hub_server import Olah


def torch_threads() -> int | None:
    """torch's intra-op threads, where a test has imported torch."""
    return sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None


def set_torch_threads(threads: int | None) -> None:
    if threads is not None and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


@pytest.fixture(autouse=True)
def thread_settings_kept() -> Iterator[None]:
    """A test that runs a stage in-process with ``--threads`` (``limit_threads``) leaves the settings as
    it found them: later tests must not run at its thread count."""
    variables = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    threads = torch_threads()
    yield
    for name, value in variables.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    set_torch_threads(threads)


@pytest.fixture(autouse=True, scope="module")
def parity_threads(request: pytest.FixtureRequest) -> Iterator[None]:
    """A parity test's module runs the kit at ``PARITY_THREADS`` threads, as its fixtures were recorded:
    some families' float results (VideoChat2's input embeddings) change bytes with the thread count."""
    if not request.module.__name__.endswith("_parity"):
        yield
        return
    import torch
    from llava_official.parity import PARITY_THREADS

    threads = torch.get_num_threads()
    torch.set_num_threads(PARITY_THREADS)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def cpu_checkout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the kit whose hf-current family installs the host's CPU torch, with the kit and
    hf-current images built once on the local base: (checkout, records)."""
    from docker_runs import LOCAL_BASE, cpu_checkout_at, torch_wheel

    if (
        shutil.which("docker") is None
        or subprocess.run(
            ["docker", "image", "inspect", LOCAL_BASE], capture_output=True, check=False
        ).returncode
        != 0
    ):
        pytest.skip(f"docker: no engine or no base image {LOCAL_BASE} (run .ci/docker-setup.sh)")
    wheel = torch_wheel(tmp_path_factory.mktemp("wheels"))
    if wheel is None:
        pytest.skip("no wheel of the host's torch from pip (its cache, find-links or index)")
    return cpu_checkout_at(tmp_path_factory.mktemp("checkout"), wheel)


@pytest.fixture(scope="session")
def boxed_run(cpu_checkout: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> BoxedRun:
    """The run of every job in a container (``run_boxed``), made once. Tests read it, never change it."""
    from docker_runs import run_boxed

    return run_boxed(*cpu_checkout, tmp_path_factory.mktemp("boxed-run"))


@pytest.fixture(scope="session")
def olah_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Olah]:
    """olah serving the hub's repositories (``hub_server``) on 127.0.0.1 for the whole session. Without
    ``.ci/hub-setup.sh`` it skips, saying so; in CI (where that script ran) it fails instead."""
    from hub_server import OLAH, Olah, build_mirrors, ported_hub_models

    if not OLAH.is_file() or shutil.which("git-lfs") is None:
        unavailable(f"hub: no olah at {OLAH} or no git-lfs (run .ci/hub-setup.sh)")
    root = tmp_path_factory.mktemp("hub")
    specs = load_specs()
    smoke = specs.run("smoke")
    assert isinstance(smoke.data, FixtureSource)
    tiny = [m for m in specs.run_models(smoke) if isinstance(m.weights, TinyWeights)]
    tiny += [m for m in ported_hub_models(specs) if m not in tiny]
    unbuilt = build_mirrors(
        root / "mirrors", list(specs.tasks.values()), smoke.data.seed, smoke.data.samples_per_task, tiny
    )
    server = Olah(root / "mirrors", root, unbuilt=unbuilt).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def e2e_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fixture -> fetch -> preprocess -> infer -> score -> report of ``E2E_RUN`` with real commands, made
    once: its folder. Tests read it; one that changes a file or runs Snakemake in it works on a copy."""
    root = tmp_path_factory.mktemp("e2e")
    snakemake(root, "--cores", "2", *write_run(root, E2E_RUN, E2E_MODELS, tasks=E2E_TASKS))
    return root


@pytest.fixture(scope="session")
def audited_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``AUDITED_RUN`` through Snakemake with every ``milebench`` process audited, made once: its folder,
    the audit records in ``audit/``. Tests read it, never change it."""
    root = tmp_path_factory.mktemp("audited")
    audited_snakemake(root, write_run(root, AUDITED_RUN, AUDITED_MODELS))
    return root


@pytest.fixture(scope="session")
def audited_bundle(audited_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``AUDITED_RUN`` archived with its data and weights (no images) and as a tarball (``bundle.tar``
    beside it), made once. Tests read it; one that tampers with it works on a copy."""
    out = tmp_path_factory.mktemp("bundles") / "bundle"
    assert archive(audited_run, AUDITED_RUN, out, "--with-data", "--with-weights", "--tarball") == 0
    return out
