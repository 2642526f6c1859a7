"""The scratch copy of a bundle that ``verify`` re-runs the kit's commands on, inside the archived images.

The bundle itself is never written to: its specs and run layout are copied to a scratch folder twice.
``run/`` is re-scored, re-aggregated and re-run: the outputs to re-compute are removed there first, so a
command that writes nothing cannot pass as one that agreed. ``render/`` keeps the archived scores and job
records and only loses the report, which is rendered again from them (a re-scored copy would show the
re-scoring jobs' own times and hosts). Each archived image runs its list of ``milebench`` commands in
one container, with no network, the scratch folder mounted at its own path and, for hub weights, the
bundle's model cache read-only at ``/models``.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import docker
from docker.errors import DockerException
from requests.exceptions import RequestException

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

RENDER = "render"

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
        """The copy that is re-scored and re-run."""
        return self.root / RUN_ROOT

    @property
    def render_root(self) -> Path:
        """The copy the report is re-rendered in, from the archived scores and records."""
        return self.root / RENDER

    @property
    def out(self) -> PurePosixPath:
        """The run's results folder inside ``run/`` (``results/<run>`` unless the spec moved it)."""
        return PurePosixPath(self.path_of(Role.AGGREGATE)).parent.relative_to(RUN_ROOT)

    def path_of(self, role: Role) -> str:
        """The bundle path of the run's one file with ``role`` (its aggregate, its verdict)."""
        found = [e.path for e in self.manifest.files if e.role is role]
        if len(found) != 1:
            raise BundleError(f"{self.bundle}: the manifest lists {len(found)} files of role {role}, not one")
        return found[0]

    def here(self, bundle_path: str) -> Path:
        """Where a bundle file lies in the scratch copy (the re-rendered copy for the report)."""
        rel = PurePosixPath(bundle_path).relative_to(RUN_ROOT)
        return (self.render_root if rel.parts[0] == "reports" else self.run_root) / rel

    def archived(self, bundle_path: str) -> Path:
        return self.bundle / bundle_path

    def command(self, name: str, *args: str, root: Path | None = None) -> list[str]:
        """A kit command line on a scratch copy of the run (the re-scored one by default)."""
        run = ("--run", self.manifest.run, "--root", str(root or self.run_root))
        return ["--specs", str(self.specs), name, *run, *args]


def open_workspace(bundle: Path, manifest: Manifest, scratch: Path) -> Workspace:
    """Copy the specs and the run's layout; remove what re-scoring and re-rendering write."""
    ws = Workspace(bundle=bundle, root=scratch, manifest=manifest)
    shutil.copytree(bundle / SPECS, ws.specs)
    shutil.copytree(bundle / RUN_ROOT, ws.run_root)
    shutil.copytree(bundle / RUN_ROOT, ws.render_root, ignore=shutil.ignore_patterns("downloads", "models"))
    out = ws.run_root / ws.out
    shutil.rmtree(out / "scores", ignore_errors=True)
    for name in ("aggregate.json", "verdict.json"):
        (out / name).unlink(missing_ok=True)
    for root in (ws.run_root, ws.render_root):
        shutil.rmtree(root / "reports" / manifest.run, ignore_errors=True)
    (ws.render_root / "reports" / manifest.run / "figures").mkdir(parents=True)
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
    names = ", ".join(sorted({c[2] for c in commands}))
    try:
        run_container(client, spec)
    except ContainerFailed as err:
        raise BundleError(f"`milebench {names}` in {image} exited with code {err.exit_code}") from None
    except (DockerException, RequestException) as err:
        raise BundleError(f"`milebench {names}` in {image}: the engine failed: {err}") from None
