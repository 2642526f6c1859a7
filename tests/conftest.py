"""Session fixtures of the Docker tests, made once for every test file that needs them: the kit image and a
CPU build of hf-current, and a run whose every job ran in them (Docker builds and container starts are
slow: minutes each on a vfs engine)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from docker_runs import LOCAL_BASE, BoxedRun, cpu_checkout_at, run_boxed, torch_wheel


@pytest.fixture(scope="session")
def cpu_checkout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the kit whose hf-current family installs the host's CPU torch, with the kit and
    hf-current images built once on the local base: (checkout, records)."""
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
    return run_boxed(*cpu_checkout, tmp_path_factory.mktemp("boxed-run"))
