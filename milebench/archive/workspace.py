"""The scratch copy of a bundle that ``verify`` re-runs the kit's commands on, inside the archived images.

The bundle itself is never written to: its specs and run layout are copied to a scratch folder, the
outputs to re-compute are removed there first (so a command that writes nothing cannot pass as one that
agreed), and each archived image runs its list of ``milebench`` commands in one container, with no
network, the scratch folder mounted at its own path and, for hub weights, the bundle's model cache
read-only at ``/models``.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import docker

from milebench.archive.badges import Role
from milebench.archive.contents import RUN_ROOT, SPECS, WEIGHTS
from milebench.archive.manifest import BundleError, Manifest
from milebench.containers.docker_runtime import (
    MODELS_MOUNT,
    BindMount,
    ContainerFailed,
    ContainerSpec,
    caller_user,
    fixed_env,
    run_container,
    same_path,
)
from milebench.provenance import COMMIT_VAR, IMAGE_ID_VAR

DRIVER = (
    "import json, sys; from milebench.cli import main; "
    "sys.exit(max([main(argv) for argv in json.loads(sys.argv[1])], default=0))"
)
"""Runs a list of ``milebench`` command lines in one interpreter: one container start per image."""


@dataclass(frozen=True)
class Workspace:
    bundle: Path
    root: Path
    manifest: Manifest

    @property
    def specs(self) -> Path:
        return self.root / SPECS

    @property
    def run_root(self) -> Path:
        return self.root / RUN_ROOT

    @property
    def out(self) -> PurePosixPath:
        """The run's results folder inside ``run/`` (``results/<run>`` unless the spec moved it)."""
        (aggregate,) = [e.path for e in self.manifest.files if e.role is Role.AGGREGATE]
        return PurePosixPath(aggregate).parent.relative_to(RUN_ROOT)

    def here(self, bundle_path: str) -> Path:
        """Where a bundle file lies in the scratch copy."""
        return self.root / bundle_path

    def archived(self, bundle_path: str) -> Path:
        return self.bundle / bundle_path

    def command(self, name: str, *args: str) -> list[str]:
        """A kit command line on the scratch copy of the run."""
        run = ("--run", self.manifest.run, "--root", str(self.run_root))
        return ["--specs", str(self.specs), name, *run, *args]


def open_workspace(bundle: Path, manifest: Manifest, scratch: Path) -> Workspace:
    """Copy the specs and the run's layout; remove what re-scoring and re-rendering write."""
    for folder in (SPECS, RUN_ROOT):
        shutil.copytree(bundle / folder, scratch / folder, symlinks=False)
    ws = Workspace(bundle=bundle, root=scratch, manifest=manifest)
    out = ws.run_root / ws.out
    shutil.rmtree(out / "scores", ignore_errors=True)
    for name in ("aggregate.json", "verdict.json"):
        (out / name).unlink(missing_ok=True)
    reports = ws.run_root / "reports" / manifest.run
    shutil.rmtree(reports, ignore_errors=True)
    (reports / "figures").mkdir(parents=True)
    return ws


def image_of(manifest: Manifest, family: str) -> str:
    for image in manifest.images:
        if image.family == family:
            return image.image_id
    raise BundleError(f"the bundle carries no image of family {family} (archived with --no-images?)")


def run_in_image(
    client: docker.DockerClient, ws: Workspace, image: str, commands: list[list[str]], gpus: str | None = None
) -> None:
    """The commands, in order, in one container of ``image``; a non-zero exit is a BundleError."""
    mounts = [same_path(ws.root, read_only=False)]
    weights = ws.bundle / WEIGHTS
    if weights.is_dir():
        mounts.append(BindMount(weights.resolve(), MODELS_MOUNT, read_only=True))
    env = fixed_env("none") | {IMAGE_ID_VAR: image, COMMIT_VAR: ws.manifest.kit_commits[-1]}
    spec = ContainerSpec(
        image=image,
        entrypoint=("python", "-c", DRIVER),
        command=(json.dumps(commands),),
        working_dir=str(ws.run_root.absolute()),
        mounts=tuple(mounts),
        env=env,
        network_mode="none",
        gpus=gpus,
        user=caller_user(),
        labels={"org.milebench.verify": ws.manifest.run},
    )
    try:
        run_container(client, spec)
    except ContainerFailed as err:
        names = ", ".join(sorted({c[2] for c in commands}))
        raise BundleError(f"`milebench {names}` in {image} exited with code {err.exit_code}") from None
