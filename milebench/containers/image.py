"""Build a family's image and record what it was built from, so an identical rebuild is a no-op.

The record ``results/images/<family>.json`` holds a build key: the hash of the Dockerfile, the hashed
lock, the kit's own source and the base image. Jobs that run in the image can depend on the record;
it changes only when one of those inputs does, never because the same image was built again.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

import docker
from docker.errors import DockerException, ImageNotFound
from pydantic import Field, ValidationError

from milebench.errors import KitError
from milebench.io import atomic_write_json, canonical_json, sha256_file, sha256_text
from milebench.spec.base import Spec, describe_errors

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The source checkout holding this package: images are built from its ``containers/`` folder and its
installable source, which an installed wheel does not carry."""
RECORDS_DIR = Path("results") / "images"
NO_EXTRA_CA = "containers/no-extra-ca.pem"
CONTEXT_CA = "extra-ca.pem"
KIT_FILES = ("pyproject.toml", "setup.py", "README.md")
"""Files besides the ``milebench/`` package that ``pip install .`` needs in the build context."""
HASHED_KIT_FILES = ("pyproject.toml", "setup.py")
"""Of those, the ones that can change behaviour (the README is only package metadata)."""
SPECS = "specs"
"""The default specs, installed as ``milebench.specs``: an image carries them, but they cannot change what a
job in it does (every job is given the specs folder by ``--specs``, mounted from the host), so they are not
hashed and editing a default spec leaves every image current."""
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


class ImageError(KitError, RuntimeError):
    """A family that cannot be built or has no usable image; the message says which and why."""


class EngineUnavailable(ImageError):
    """No Docker engine answers; the message carries the SDK's reason."""


class ImageRecord(Spec):
    """What an image was built from; ``build_key`` decides whether a rebuild is needed."""

    family: str
    image_id: str
    tag: str
    base: str = Field(description="The base image reference as passed to the build.")
    base_id: str | None = Field(description="The engine's id of the base image, when it was local.")
    dockerfile_sha256: str
    lock_sha256: str
    source_sha256: str = Field(description="The kit package installed into the image.")
    build_key: str
    built_at: datetime = Field(description="UTC time the build finished.")
    build_seconds: float = Field(ge=0)


@dataclass(frozen=True)
class Family:
    """The files of one family under ``containers/``."""

    name: str
    root: Path

    @property
    def folder(self) -> Path:
        return self.root / "containers" / self.name

    @property
    def dockerfile(self) -> Path:
        return self.folder / "Dockerfile"

    @property
    def lock(self) -> Path:
        return self.folder / "requirements.lock"


def known_families(root: Path = REPO_ROOT) -> list[str]:
    return sorted(p.parent.name for p in (root / "containers").glob("*/Dockerfile"))


def family(name: str, root: Path = REPO_ROOT) -> Family:
    """The family's files, or an error naming the missing file and the families that exist."""
    fam = Family(name, root)
    if not (root / "containers").is_dir():
        raise ImageError(
            f"container family {name!r}: {root / 'containers'} not found: images are built from a source "
            "checkout of the kit (its containers/ folder and pyproject.toml), not from an installed package"
        )
    for path in (fam.dockerfile, fam.lock):
        if not path.is_file():
            known = ", ".join(known_families(root)) or "none"
            raise ImageError(f"container family {name!r}: {path} not found (families: {known})")
    return fam


def default_base(dockerfile: Path) -> str:
    """The ``ARG BASE=...`` default of a Dockerfile: the base used when none is given."""
    match = re.search(r"^ARG BASE=(\S+)\s*$", dockerfile.read_text(encoding="utf-8"), re.MULTILINE)
    if match is None:
        raise ImageError(f"{dockerfile}: no `ARG BASE=<image>` line")
    return match.group(1)


def kit_sources(root: Path) -> Iterator[Path]:
    """Every file of the kit that can change an image's behaviour, in a stable order."""
    yield from (root / name for name in HASHED_KIT_FILES)
    yield from sorted(
        p
        for p in (root / "milebench").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


def source_sha256(root: Path) -> str:
    """Hash of the kit's installable source: names and contents, so a rename counts too."""
    digest = hashlib.sha256()
    for path in kit_sources(root):
        digest.update(f"{path.relative_to(root).as_posix()}\0{sha256_file(path)}\n".encode())
    return digest.hexdigest()


def build_key(dockerfile_sha: str, lock_sha: str, source_sha: str, base: str, base_id: str | None) -> str:
    return sha256_text(
        canonical_json(
            {
                "dockerfile": dockerfile_sha,
                "lock": lock_sha,
                "source": source_sha,
                "base": base,
                "base_id": base_id,
            }
        )
    )


def build_args(base: str | None, with_ca_bundle: bool) -> dict[str, str]:
    """Docker build arguments: only what differs from the Dockerfile's defaults."""
    args: dict[str, str] = {}
    if base is not None:
        args["BASE"] = base
    if with_ca_bundle:
        args["EXTRA_CA_BUNDLE"] = CONTEXT_CA
    return args


def content_key(fam: Family) -> str:
    """Hash of what a family's image is built from in the checkout (Dockerfile, lock, kit source),
    independent of any engine: the tag images carry in a registry, and what the DAG tracks."""
    return sha256_text(
        canonical_json(
            {
                "dockerfile": sha256_file(fam.dockerfile),
                "lock": sha256_file(fam.lock),
                "source": source_sha256(fam.root),
            }
        )
    )


def registry_uri(registry: str, family_name: str, root: Path = REPO_ROOT) -> str:
    """Where deployment apptainer pulls a family's image: ``<registry>/<family>:<content key>``."""
    return f"{registry}/{family_name}:{content_key(family(family_name, root))[:12]}"


TAG_KEY_CHARS = 12


def image_tag(family_name: str, key: str) -> str:
    return f"milebench-{family_name}:{key[:TAG_KEY_CHARS]}"


def is_kit_tag(tag: str, family_name: str) -> bool:
    """The tag is one ``image build`` gives a family's image (not one a user chose in its name space)."""
    return re.fullmatch(rf"milebench-{re.escape(family_name)}:[0-9a-f]{{{TAG_KEY_CHARS}}}", tag) is not None


def copy_kit_source(root: Path, dest: Path) -> Path:
    """What ``pip install`` of the kit needs from a checkout (the package with its data, the specs, the
    build configuration, the README), without caches or outputs."""
    for name in KIT_FILES:
        shutil.copy2(root / name, dest / name)
    shutil.copytree(root / "milebench", dest / "milebench", ignore=SKIP)
    shutil.copytree(root / SPECS, dest / SPECS, ignore=SKIP)
    return dest


def prepare_context(fam: Family, ca_bundle: Path | None, dest: Path) -> Path:
    """A minimal build context: the package, this family's folder and the CA bundle, nothing else
    (a checkout's ``results/`` can hold gigabytes the engine would otherwise receive)."""
    if ca_bundle is not None and not ca_bundle.is_file():
        raise ImageError(f"CA bundle {ca_bundle} not found")
    copy_kit_source(fam.root, dest)
    (dest / "containers").mkdir()
    shutil.copytree(fam.folder, dest / "containers" / fam.name, ignore=SKIP)
    shutil.copy2(fam.root / NO_EXTRA_CA, dest / NO_EXTRA_CA)
    if ca_bundle is not None:
        shutil.copy2(ca_bundle, dest / CONTEXT_CA)
    return dest


def record_path(family_name: str, records: Path = RECORDS_DIR) -> Path:
    return records / f"{family_name}.json"


def parse_record(path: Path) -> ImageRecord | None:
    """The stored record, or None when absent; an ImageError names a record that does not parse."""
    if not path.is_file():
        return None
    try:
        return ImageRecord.model_validate_json(path.read_bytes())
    except OSError as err:
        raise ImageError(f"{path}: cannot read the image record: {err.strerror or err}") from None
    except ValidationError as err:
        raise ImageError(f"{path}: not an image record: {describe_errors(err)}") from None


def read_record(path: Path) -> ImageRecord | None:
    """The stored record, or None when absent; an unreadable record is rebuilt, not trusted."""
    try:
        return parse_record(path)
    except ImageError as err:
        log.warning("%s, ignored", err)
        return None


API_TIMEOUT_S = 600
"""How long one call to the engine may take by default. Creating and removing a container copies and deletes
the image's whole file system under some storage drivers (vfs), which takes minutes on a loaded disk, beyond
the SDK's default of 60 s; a job's own run time is not bounded by it (its wait and log stream have none)."""


def client_from_env(timeout_s: int = API_TIMEOUT_S) -> docker.DockerClient:
    """``timeout_s`` bounds each API call (longer for saving and loading whole images)."""
    try:
        return docker.from_env(timeout=timeout_s)
    except DockerException as err:
        raise EngineUnavailable(f"no Docker engine answers: {err}") from err


def local_image_id(client: docker.DockerClient, ref: str) -> str | None:
    try:
        return client.images.get(ref).id
    except ImageNotFound:
        return None


def current_key(fam: Family, base: str, client: docker.DockerClient) -> str:
    """The build key the family would have if built now on ``base``."""
    return build_key(
        sha256_file(fam.dockerfile),
        sha256_file(fam.lock),
        source_sha256(fam.root),
        base,
        local_image_id(client, base),
    )


def is_current(record: ImageRecord | None, key: str, client: docker.DockerClient) -> TypeGuard[ImageRecord]:
    """True when the record has this key and the engine still holds its image."""
    if record is None or record.build_key != key:
        return False
    return local_image_id(client, record.image_id) is not None


def stream_build(chunks: Iterable[dict[str, Any]], family_name: str) -> str:
    """Log the engine's build output line by line; return the built image id."""
    image_id: str | None = None
    for chunk in chunks:
        if "error" in chunk:
            raise ImageError(f"building family {family_name!r} failed: {chunk['error'].strip()}")
        for line in chunk.get("stream", "").splitlines():
            if line.strip():
                log.info("[build %s] %s", family_name, line.rstrip())
        if "status" in chunk:
            log.debug("[build %s] %s %s", family_name, chunk["status"], chunk.get("progress", ""))
        aux = chunk.get("aux")
        if isinstance(aux, dict) and "ID" in aux:
            image_id = aux["ID"]
    if image_id is None:
        raise ImageError(f"building family {family_name!r}: the engine reported no image id")
    return image_id


def build_image(
    family_name: str,
    *,
    base: str | None = None,
    ca_bundle: Path | None = None,
    root: Path = REPO_ROOT,
    records: Path = RECORDS_DIR,
    client: docker.DockerClient | None = None,
) -> ImageRecord:
    """Build ``containers/<family>`` unless an identical image is recorded and present; return its record."""
    fam = family(family_name, root)
    client = client or client_from_env()
    base_ref = base or default_base(fam.dockerfile)
    key = current_key(fam, base_ref, client)
    path = record_path(family_name, records)
    record = read_record(path)
    if is_current(record, key, client):
        log.info("family %s: image %s is current (%s), nothing to build", family_name, record.tag, path)
        return record
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"milebench-context-{family_name}-") as tmp:
        context = prepare_context(fam, ca_bundle, Path(tmp))
        tag = image_tag(family_name, key)
        log.info("family %s: building %s on %s", family_name, tag, base_ref)
        chunks = client.api.build(
            path=str(context),
            dockerfile=f"containers/{family_name}/Dockerfile",
            buildargs=build_args(base, ca_bundle is not None),
            tag=tag,
            network_mode="host",
            rm=True,
            forcerm=True,
            decode=True,
        )
        image_id = stream_build(chunks, family_name)
    record = ImageRecord(
        family=family_name,
        image_id=image_id,
        tag=tag,
        base=base_ref,
        base_id=local_image_id(client, base_ref),
        dockerfile_sha256=sha256_file(fam.dockerfile),
        lock_sha256=sha256_file(fam.lock),
        source_sha256=source_sha256(root),
        build_key=current_key(fam, base_ref, client),
        built_at=datetime.now(UTC),
        build_seconds=round(time.monotonic() - start, 3),
    )
    atomic_write_json(path, record.model_dump(mode="json"))
    log.info("family %s: built %s in %.0fs -> %s", family_name, image_id, record.build_seconds, path)
    return record


def recorded_image(
    family_name: str, *, root: Path = REPO_ROOT, records: Path = RECORDS_DIR, client: docker.DockerClient
) -> ImageRecord:
    """The recorded image of a family, refusing one built from other files than the checkout's."""
    fam = family(family_name, root)
    path = record_path(family_name, records)
    record = read_record(path)
    if record is None:
        raise ImageError(
            f"no image recorded for family {family_name!r} ({path}): "
            f"run `milebench image build --family {family_name}`"
        )
    if not is_current(record, current_key(fam, record.base, client), client):
        raise ImageError(
            f"the image of family {family_name!r} ({path}) is missing or stale: its Dockerfile, lock, base "
            f"or the kit source changed since; run `milebench image build --family {family_name}`"
        )
    return record
