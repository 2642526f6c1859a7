"""A CycloneDX software bill of materials per image, made by ``cyclonedx-py`` run inside the image.

The images carry no SBOM tool, and must not be changed to get one: the tool's own distributions (pure
Python, copied from the host's environment) are mounted read-only into a throw-away container of the
image, with no network, and inspect the interpreter the image runs the kit with. The tool's path is
taken off again before it asks that interpreter for its ``sys.path``, so the SBOM lists the image's
packages and nothing of the tool's. ``--output-reproducible`` leaves out the serial number and time;
the host validates the result against the CycloneDX 1.6 schema (the image need not carry the
validator's compiled dependencies).
"""

from __future__ import annotations

import importlib.metadata
import logging
import shutil
import tempfile
from pathlib import Path

import docker
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from docker.errors import DockerException
from packaging.requirements import Requirement
from requests.exceptions import RequestException

from milebench.archive.manifest import BundleError
from milebench.containers.docker_runtime import (
    BindMount,
    ContainerFailed,
    ContainerSpec,
    caller_user,
    run_container,
)
from milebench.containers.image import ImageRecord

log = logging.getLogger(__name__)

SBOM = "sbom"
TOOL = "cyclonedx-bom"
TOOL_MOUNT = "/opt/milebench-sbom-tool"
OUT_MOUNT = "/sbom"
RUN_TOOL = (
    "import os, runpy, sys; os.environ.pop('PYTHONPATH'); "
    "sys.argv = ['cyclonedx-py', *sys.argv[1:], sys.executable]; "
    "runpy.run_module('cyclonedx_py', run_name='__main__')"
)
"""Runs the tool on the interpreter that runs it, with the tool's folder off the path it inspects."""


def sbom_file(family: str) -> str:
    return f"{SBOM}/{family}.cdx.json"


def closure(name: str) -> list[importlib.metadata.Distribution]:
    """The installed distribution ``name`` and everything it requires (no extras), each once."""
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = [name]
    while pending:
        try:
            dist = importlib.metadata.distribution(pending.pop())
        except importlib.metadata.PackageNotFoundError as err:
            raise BundleError(f"SBOM: {err.name} is not installed: pip install '.[archive]'") from None
        key = (dist.metadata["Name"] or "").lower()
        if key in found:
            continue
        found[key] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                pending.append(req.name)
    return [found[k] for k in sorted(found)]


def tool_tree(dest: Path) -> Path:
    """The tool and its requirements as an importable folder: their files, no caches or scripts."""
    for dist in closure(TOOL):
        for file in dist.files or []:
            if "__pycache__" in file.parts or file.parts[0] == ".." or file.suffix == ".pyc":
                continue
            target = dest / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(str(dist.locate_file(file))), target)
    return dest


def image_sbom(client: docker.DockerClient, record: ImageRecord, dest: Path, tool: Path) -> None:
    """Write the CycloneDX JSON of ``record``'s image to ``dest``."""
    with tempfile.TemporaryDirectory(prefix="milebench-sbom-") as tmp:
        out = Path(tmp)
        spec = ContainerSpec(
            image=record.image_id,
            entrypoint=("python", "-c", RUN_TOOL),
            command=(
                "environment",
                "--output-reproducible",
                "--no-validate",
                "--of",
                "JSON",
                "-o",
                f"{OUT_MOUNT}/sbom.json",
            ),
            working_dir="/tmp",
            mounts=(BindMount(tool.resolve(), TOOL_MOUNT, True), BindMount(out.resolve(), OUT_MOUNT, False)),
            env={"PYTHONPATH": TOOL_MOUNT, "HOME": "/tmp"},
            user=caller_user(),
            labels={"org.milebench.sbom": record.family},
        )
        try:
            run_container(client, spec, environ={})
        except (DockerException, RequestException) as err:
            raise BundleError(f"family {record.family}: the SBOM container failed: {err}") from None
        except ContainerFailed as err:
            raise BundleError(
                f"family {record.family}: cyclonedx-py failed in {record.image_id} "
                f"(exit code {err.exit_code})"
            ) from None
        text = (out / "sbom.json").read_text(encoding="utf-8")
    problem = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if problem is not None:
        raise BundleError(f"family {record.family}: the SBOM is not valid CycloneDX 1.6: {problem}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text, encoding="utf-8")
    log.info("family %s: SBOM -> %s", record.family, dest)
