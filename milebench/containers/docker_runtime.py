"""Run one ``milebench`` subcommand inside a family's image, and always clean the container up.

The container sees only what the job needs: the specs folder in use read-only (the package's own or a
user's, with whatever its links point to), the run's output folders read-write (both at their host paths,
so every path in a spec means the same inside), the model cache read-only at ``/models``, and exactly the
environment variables the code it runs declares it reads. Models with local weights get no network at all
and no variable; API models get a network plus their key, base URL and proxies, passed by name and never
logged; of the other stages only a fetch from the hub or an http(s) mirror gets one, with what a download
reads (the hub token and endpoint, proxies).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import NotFound
from docker.types import DeviceRequest, Mount

from milebench.errors import KitError
from milebench.infer.registry import adapter_environment
from milebench.spec.model import ApiModel, ModelSpec

log = logging.getLogger(__name__)

MODELS_MOUNT = "/models"
STOP_TIMEOUT_S = 10


class ContainerFailed(KitError, RuntimeError):
    """The command in the container exited non-zero."""

    def __init__(self, image: str, command: tuple[str, ...], exit_code: int):
        self.exit_code = exit_code
        super().__init__(f"`milebench {' '.join(command)}` in {image} exited with code {exit_code}")


class Terminated(BaseException):
    """SIGTERM while a container runs; a BaseException like KeyboardInterrupt, so nothing swallows it."""


@dataclass(frozen=True)
class BindMount:
    source: Path
    target: str
    read_only: bool


@dataclass(frozen=True)
class ContainerSpec:
    """Everything a container is created from, except secret values: ``passthrough`` holds only the
    names of variables whose values are read from the caller's environment at creation time."""

    image: str
    command: tuple[str, ...]
    working_dir: str
    mounts: tuple[BindMount, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    passthrough: tuple[str, ...] = ()
    network_mode: str = "none"
    gpus: str | None = None
    user: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    entrypoint: tuple[str, ...] | None = None
    """Replaces the image's ``python -m milebench`` (tools run inside an archived image)."""


def passthrough_names(model: ModelSpec) -> tuple[str, ...]:
    """The caller's variables a model may see: those its adapter declares it reads, and no other."""
    return adapter_environment(model)


def network_for(model: ModelSpec, api_network: str) -> str:
    return api_network if isinstance(model.weights, ApiModel) else "none"


def fixed_env(network_mode: str) -> dict[str, str]:
    """Non-secret settings: no hub access attempts without a network, a writable HOME for any uid."""
    env = {"HF_HOME": MODELS_MOUNT, "HOME": "/tmp"}
    if network_mode == "none":
        env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return env


def same_path(path: Path, read_only: bool) -> BindMount:
    """Mount at the path the caller uses (a symlinked results folder keeps its name inside)."""
    return BindMount(path.resolve(), str(path.absolute()), read_only)


def specs_mounts(root: Path) -> list[BindMount]:
    """The specs folder read-only at its host path, and read-only where each link in it that leads out of
    it points (a user's folder that links the kit's own tasks or models), so every spec the job reads
    resolves inside the container as it does outside."""
    mounts = {str(root.absolute()): same_path(root, read_only=True)}
    inside = root.resolve()
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            link = Path(folder, name)
            if link.is_symlink() and not link.resolve().is_relative_to(inside):
                named = os.path.normpath(Path(folder, os.readlink(link)))
                mounts.setdefault(named, BindMount(link.resolve(), named, read_only=True))
    return list(mounts.values())


def container_spec(
    *,
    image: str,
    command: tuple[str, ...],
    specs_root: Path,
    writable: tuple[Path, ...],
    readable: tuple[Path, ...] = (),
    model_cache: Path | None,
    workdir: Path,
    network: str = "none",
    passthrough: tuple[str, ...] = (),
    gpus: str | None = None,
    user: str | None = None,
    labels: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> ContainerSpec:
    """The container for one kit command: paths keep their host names inside.

    ``env`` adds non-secret settings (the job's provenance facts) to the fixed ones; ``passthrough``
    names the caller's variables the command may see."""
    mounts = specs_mounts(specs_root)
    mounts += [same_path(p, read_only=True) for p in readable]
    mounts += [same_path(p, read_only=False) for p in writable]
    if model_cache is not None:
        mounts.append(BindMount(model_cache.resolve(), MODELS_MOUNT, read_only=True))
    return ContainerSpec(
        image=image,
        command=("--specs", str(specs_root.absolute()), *command),
        working_dir=str(workdir.absolute()),
        mounts=tuple(mounts),
        env=fixed_env(network) | dict(env or {}),
        passthrough=passthrough,
        network_mode=network,
        gpus=gpus,
        user=user,
        labels=dict(labels or {}),
    )


def job_spec(
    *,
    image: str,
    model: ModelSpec,
    command: tuple[str, ...],
    specs_root: Path,
    writable: tuple[Path, ...],
    readable: tuple[Path, ...] = (),
    model_cache: Path | None,
    workdir: Path,
    gpus: str | None = None,
    api_network: str = "bridge",
    user: str | None = None,
    labels: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> ContainerSpec:
    """The container for one kit command on one model: no network unless it is an API model."""
    return container_spec(
        image=image,
        command=command,
        specs_root=specs_root,
        writable=writable,
        readable=readable,
        model_cache=model_cache,
        workdir=workdir,
        network=network_for(model, api_network),
        passthrough=passthrough_names(model),
        gpus=gpus,
        user=user,
        labels=labels,
        env=env,
    )


def caller_user() -> str:
    """Run as the caller's uid:gid, so files written to the results folder belong to the caller."""
    return f"{os.getuid()}:{os.getgid()}"


def default_model_cache(environ: Mapping[str, str]) -> Path | None:
    """The host's Hugging Face cache (``$HF_HOME`` or ``~/.cache/huggingface``), if it exists."""
    path = Path(environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    return path if path.is_dir() else None


def device_requests(gpus: str | None) -> list[DeviceRequest]:
    """``all`` or comma-separated device ids, as ``docker run --gpus``."""
    if not gpus:
        return []
    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=[g.strip() for g in gpus.split(",")], capabilities=[["gpu"]])]


def environment(spec: ContainerSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """Fixed settings plus the allowed names present in ``environ``; nothing else crosses over."""
    return dict(spec.env) | {name: environ[name] for name in spec.passthrough if name in environ}


SHARED_MEMORY = "2g"
"""The containers' ``/dev/shm``: Docker's default of 64 MiB is too small for the processes of a model's
engine to share tensors (vLLM asks 160 MiB for the tiny LLaVA alone); a limit, not an allocation."""


def create_kwargs(spec: ContainerSpec, environ: Mapping[str, str]) -> dict[str, Any]:
    """Arguments of ``containers.create``; holds secret values, so it is passed on, never logged."""
    return {
        "image": spec.image,
        "command": list(spec.command),
        "working_dir": spec.working_dir,
        "mounts": [
            Mount(target=m.target, source=str(m.source), type="bind", read_only=m.read_only)
            for m in spec.mounts
        ],
        "environment": environment(spec, environ),
        "network_mode": spec.network_mode,
        "device_requests": device_requests(spec.gpus),
        "user": spec.user,
        "labels": dict(spec.labels),
        "entrypoint": list(spec.entrypoint) if spec.entrypoint else None,
        "shm_size": SHARED_MEMORY,
        "detach": True,
    }


def describe(spec: ContainerSpec, environ: Mapping[str, str]) -> str:
    """A loggable summary: mounts with their access, variable NAMES only."""
    mounts = ", ".join(f"{m.source}->{m.target}:{'ro' if m.read_only else 'rw'}" for m in spec.mounts)
    passed = sorted(name for name in spec.passthrough if name in environ)
    return (
        f"image {spec.image}; command {' '.join(spec.entrypoint or ('milebench',))} {' '.join(spec.command)};"
        f" network {spec.network_mode};"
        f" gpus {spec.gpus or 'none'}; mounts {mounts}; env {sorted(spec.env)}; passed through {passed}"
    )


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into :class:`Terminated` for the duration, so cleanup runs when a scheduler kills us."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def stream_logs(container: Any, name: str) -> None:
    """Forward the container's output to the log line by line until it exits."""
    pending = b""
    for chunk in container.logs(stream=True, follow=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            log.info("[%s] %s", name, line.decode("utf-8", "replace").rstrip())
    if pending.strip():
        log.info("[%s] %s", name, pending.decode("utf-8", "replace").rstrip())


def remove(container: Any) -> None:
    """Stop and remove, tolerating a container that is already gone. An engine too slow to answer the
    removal (a storage driver that deletes a whole file system copy) leaves a warning, not a failed job:
    the command's outputs are complete, and the container is labelled for ``docker rm``."""
    try:
        container.stop(timeout=STOP_TIMEOUT_S)
    except NotFound:
        return
    except docker.errors.APIError as err:
        log.warning("stopping container %s: %s", container.short_id, err)
    try:
        container.remove(force=True, v=True)
    except NotFound:
        return
    except requests.exceptions.Timeout as err:
        log.warning(
            "removing container %s: the engine did not answer (%s); check it is gone with `docker ps -a`",
            container.short_id,
            err,
        )


def run_container(
    client: docker.DockerClient, spec: ContainerSpec, environ: Mapping[str, str] | None = None
) -> None:
    """Run to completion, streaming logs; raise :class:`ContainerFailed` on a non-zero exit.

    The container is stopped and removed in every case: success, failure, Ctrl-C or SIGTERM.
    """
    environ = os.environ if environ is None else environ
    log.info("container: %s", describe(spec, environ))
    with sigterm_raises():
        container = client.containers.create(**create_kwargs(spec, environ))
        try:
            container.start()
            stream_logs(container, container.short_id)
            exit_code = int(container.wait()["StatusCode"])
        finally:
            remove(container)
    if exit_code != 0:
        raise ContainerFailed(spec.image, spec.command, exit_code)
