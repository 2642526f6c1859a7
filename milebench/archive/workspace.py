"""The scratch copy of a bundle that ``verify`` re-runs the kit's commands on, inside the archived images.

The bundle itself is never written to: its specs and run layout are copied to a scratch folder twice,
file by file as the manifest lists them (each resolved inside the bundle before it is read; the manifest's
paths and run name were validated as such, so every copy lands inside the scratch folder, and nothing is
ever removed). ``run/`` is re-scored, re-aggregated and re-run: the outputs to re-compute are left out of
it, so a command that writes nothing cannot pass as one that agreed. ``render/`` keeps the archived
scores and job records and only lacks the report, which is rendered again from them (a re-scored copy
would show the re-scoring jobs' own times and hosts). Each archived image runs its list of ``milebench``
commands in one container, with no network, the scratch folder mounted at its own path and, for hub
weights, the bundle's model cache read-only at ``/models``.
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
from milebench.archive.manifest import RUN_ROOT, SPECS, WEIGHTS, BundleError, Entry, Manifest, inside
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
NOT_RENDERED = frozenset({"downloads", "models"})
"""Bulk the report is not rendered from: left out of ``render/``."""

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
    recomputed: frozenset[str]
    """What re-scoring and re-aggregating write in the run's results folder (first names under it): left
    out of ``run/``."""

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
        return self.in_run(self.path_of(Role.AGGREGATE)).parent

    @property
    def reports(self) -> PurePosixPath:
        """The run's reports folder inside ``run/``."""
        return PurePosixPath("reports", self.manifest.run)

    def is_recomputed(self, rel: PurePosixPath) -> bool:
        """A file of ``run/`` that re-scoring or re-aggregating writes."""
        return rel.is_relative_to(self.out) and rel.relative_to(self.out).parts[0] in self.recomputed

    def in_run(self, bundle_path: str) -> PurePosixPath:
        """A bundle path of the run's layout, relative to ``run/``."""
        path = PurePosixPath(bundle_path)
        if path.parts[0] != RUN_ROOT or len(path.parts) < 2:
            raise BundleError(f"{self.bundle}: {bundle_path}: not in the run's layout ({RUN_ROOT}/)")
        return path.relative_to(RUN_ROOT)

    def path_of(self, role: Role) -> str:
        """The bundle path of the run's one file with ``role`` (its aggregate, its verdict)."""
        found = [e.path for e in self.manifest.files if e.role is role]
        if len(found) != 1:
            raise BundleError(f"{self.bundle}: the manifest lists {len(found)} files of role {role}, not one")
        return found[0]

    def here(self, bundle_path: str) -> Path:
        """Where a bundle file lies in the scratch copy (the re-rendered copy for the report)."""
        rel = self.in_run(bundle_path)
        return self.scratch(RENDER if rel.parts[0] == "reports" else RUN_ROOT, rel)

    def archived(self, bundle_path: str) -> Path:
        return inside(self.bundle, bundle_path)

    def scratch(self, *parts: str | PurePosixPath) -> Path:
        """A path in the scratch folder, refused when it would resolve outside it."""
        return inside(self.root, PurePosixPath(*parts).as_posix())

    def command(self, name: str, *args: str, root: Path | None = None) -> list[str]:
        """A kit command line on a scratch copy of the run (the re-scored one by default)."""
        run = ("--run", self.manifest.run, "--root", str(root or self.run_root))
        return ["--specs", str(self.specs), name, *run, *args]


def open_workspace(bundle: Path, manifest: Manifest, scratch: Path, recomputed: frozenset[str]) -> Workspace:
    """Copy the specs and the run's layout, without what re-scoring and re-rendering write."""
    ws = Workspace(bundle=bundle, root=scratch, manifest=manifest, recomputed=recomputed)
    for e in manifest.files:
        if e.path.startswith(f"{SPECS}/"):
            copy_entry(ws, e, ws.scratch(e.path))
        elif e.path.startswith(f"{RUN_ROOT}/"):
            rel = ws.in_run(e.path)
            if rel.is_relative_to(ws.reports):
                continue
            if not ws.is_recomputed(rel):
                copy_entry(ws, e, ws.scratch(RUN_ROOT, rel))
            if not NOT_RENDERED & set(rel.parts):
                copy_entry(ws, e, ws.scratch(RENDER, rel))
    ws.scratch(RUN_ROOT).mkdir(parents=True, exist_ok=True)
    ws.scratch(RENDER, ws.reports, "figures").mkdir(parents=True)
    return ws


def copy_entry(ws: Workspace, e: Entry, dest: Path) -> None:
    """One listed file into the scratch folder; one the bundle lacks is left out (the hash check names it)."""
    source = ws.archived(e.path)
    if source.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)


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
    weights = inside(ws.bundle, WEIGHTS)
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
