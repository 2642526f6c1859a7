"""What the Docker tests of the DAG share: run specs of one fixture task, a copy of the kit whose hf-current
family installs the host's CPU torch, and a run of it through Snakemake."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from mini_specs import linked_specs
from test_containers import HOST_CA, LOCAL_BASE

from milebench.containers import image

__all__ = ["HOST_CA", "LOCAL_BASE"]
REPO = Path(__file__).resolve().parents[1]


SAME_CHOICES = "vllm-choices"
"""A variant added to a specs copy's model: its vllm variant's choices on the transformers backend."""


def add_same_choices(specs: Path, model: str) -> None:
    """Give ``model`` of the specs copy ``specs`` the variant ``SAME_CHOICES``: what the engine alone
    changes is then the drift between it and the vllm variant."""
    path = specs / "models" / f"{model}.yaml"
    spec = yaml.safe_load(path.read_text())
    variants = spec["execution"]["variants"]
    same = {k: v for k, v in variants["vllm"].items() if k not in ("backend", "container")}
    variants[SAME_CHOICES] = {**same, "description": "The vllm variant's choices on transformers."}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def write_run(root: Path, name: str, **extra: object) -> None:
    specs = root / "specs"
    if not specs.exists():
        linked_specs(specs)
    run = {
        "name": name,
        "description": f"{name} dry run",
        "models": ["random", "llava-1.5-7b"],
        "tasks": ["ActionSequence"],
        "data": {"kind": "fixture", "seed": 0, "samples_per_task": 2},
        **extra,
    }
    (specs / "runs" / f"{name}.yaml").write_text(yaml.safe_dump(run))


CUDA_ONLY = re.compile(r"(torch|triton|cuda-[a-z-]+|nvidia-[a-z0-9-]+)==")
"""Pins of the hf-current lock that the CPU build of the tests replaces by the host's CPU torch wheel."""

BOXED_RUN = "box"
"""The run of ``boxed_run``: Random and tiny LLaVA on one fixture task, every job in a container."""


def without_pins(lock: str, drop: re.Pattern[str]) -> str:
    """A hashed lock without the entries (pin line, hash and ``# via`` lines) whose pin matches ``drop``."""
    kept, dropping = [], False
    for line in lock.splitlines(keepends=True):
        if not line[:1].isspace():
            dropping = bool(drop.match(line))
        if not dropping:
            kept.append(line)
    return "".join(kept)


def with_cpu_torch(family: Path, wheel: Path) -> None:
    """Make a copy of the hf-current family install ``wheel`` (the host's CPU torch, copied beside its
    Dockerfile) by its hash in place of the lock's CUDA torch: gigabytes less, and the host's very build,
    so the tiny models compute in the image as on the host."""
    shutil.copy2(wheel, family / wheel.name)
    lock = without_pins((family / "requirements.lock").read_text(), CUDA_ONLY)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    lock += f"torch @ file:///tmp/{wheel.name} \\\n    --hash=sha256:{digest}\n"
    (family / "requirements.lock").write_text(lock)
    dockerfile = (family / "Dockerfile").read_text()
    copy = "COPY containers/hf-current/requirements.lock /tmp/requirements.lock"
    assert copy in dockerfile
    dockerfile = dockerfile.replace(
        copy, f"COPY containers/hf-current/requirements.lock containers/hf-current/{wheel.name} /tmp/"
    )
    (family / "Dockerfile").write_text(
        dockerfile.replace("rm /tmp/requirements.lock", f"rm /tmp/requirements.lock /tmp/{wheel.name}")
    )


def commit_checkout(root: Path) -> None:
    """Make the copy a git checkout of its own, so its jobs record a commit whose source can be archived
    (the torch wheel, a build input of gigabytes' worth, is left out of it)."""
    (root / ".gitignore").write_text("*.whl\n__pycache__/\n")
    git = ["git", "-C", str(root), "-c", "user.name=tests", "-c", "user.email=tests@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "CPU torch checkout"]):
        subprocess.run([*git, *args], check=True, capture_output=True)


@dataclass(frozen=True)
class BoxedRun:
    checkout: Path
    records: Path
    root: Path
    """The finished run's working folder: specs/, results/, reports/."""

    @property
    def env(self) -> dict[str, str]:
        """The environment its kit commands ran in: the checkout's package."""
        return {**os.environ, "PYTHONPATH": str(self.checkout)}


def snakemake_in(checkout: Path, root: Path, run: str, *placement: str) -> None:
    """Run ``run`` of ``root/specs`` to its report with the checkout's Snakefile and images, where the
    ``placement`` config keys say (``deployment=docker``; default: on the host)."""
    build = [f"image_base={LOCAL_BASE}"] + ([f"image_ca_bundle={HOST_CA}"] if HOST_CA.is_file() else [])
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(checkout / "Snakefile"), "--cores", "2"]
    config = ["--config", f"run={run}", f"specs={root / 'specs'}", *build, *placement]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([*command, *config], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def torch_wheel(dest: Path) -> Path | None:
    """The host's torch wheel from pip (its cache, find-links or index) in ``dest``; None without one."""
    import torch

    download = [sys.executable, "-m", "pip", "download", f"torch=={torch.__version__}", "--no-deps"]
    if subprocess.run([*download, "-d", str(dest)], capture_output=True, check=False).returncode != 0:
        return None
    (wheel,) = dest.glob("torch-*.whl")
    return wheel


def cpu_checkout_at(root: Path, wheel: Path) -> tuple[Path, Path]:
    """A copy of the kit (package, specs, build files, Snakefile, rules, families) in ``root`` whose
    hf-current family installs ``wheel``, with the kit and hf-current images built on the local base:
    (checkout, records)."""
    image.copy_kit_source(REPO, root)
    for name in ("rules", "containers"):
        shutil.copytree(REPO / name, root / name, ignore=image.SKIP)
    shutil.copy2(REPO / "Snakefile", root / "Snakefile")
    with_cpu_torch(root / "containers" / "hf-current", wheel)
    commit_checkout(root)
    records = root / image.RECORDS_DIR
    ca = HOST_CA if HOST_CA.is_file() else None
    for name in ("kit", "hf-current"):
        image.build_image(name, base=LOCAL_BASE, ca_bundle=ca, root=root, records=records)
    return root, records


def run_boxed(checkout: Path, records: Path, root: Path) -> BoxedRun:
    """Random and tiny LLaVA through the DAG in ``root`` with ``docker_jobs=all``, fixture to report: the
    stages in the kit image, the tiny model's weights and inference in hf-current's."""
    write_run(root, BOXED_RUN, models=["random", "tiny-llava"])
    shutil.copytree(records, root / image.RECORDS_DIR)
    snakemake_in(checkout, root, BOXED_RUN, "deployment=docker", "docker_jobs=all")
    return BoxedRun(checkout, records, root)
