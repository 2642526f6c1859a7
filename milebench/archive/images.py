"""Family images out of the engine into the bundle (``docker save``) and back in (``docker load``).

An image is saved by its id, so the archive carries no tag, and the engine writes the same bytes every
time. The recorded id is the sha256 of the image's config, which names every layer's digest: the archive
is checked against both before it is loaded (an engine that already holds a layer does not read the
archive's copy of it again), and loading never pulls: the engine must report the recorded id.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import re
import tarfile
import zlib
from pathlib import Path
from typing import IO, Any

import docker
from docker.errors import APIError, ImageNotFound
from requests.exceptions import RequestException

from milebench.archive.manifest import BundleError
from milebench.containers.image import ImageRecord
from milebench.io import CHUNK

log = logging.getLogger(__name__)

IMAGES = "images"
ENGINE_TIMEOUT_S = 1800
"""Per API call: saving, loading or starting a container of a multi-gigabyte image can take minutes."""
GZIP_MAGIC = b"\x1f\x8b"
LOADED = re.compile(r"Loaded image ID: (sha256:[0-9a-f]{64})")


def image_file(image_id: str) -> str:
    """The archive's name in the bundle: the image id's hex digits."""
    return f"{IMAGES}/{image_id.removeprefix('sha256:')}.tar"


def save_image(client: docker.DockerClient, record: ImageRecord, dest: Path) -> None:
    """Stream ``docker save <id>`` to ``dest``; the image must still be in the engine."""
    try:
        chunks = client.api.get_image(record.image_id)
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
    except (ImageNotFound, APIError, RequestException) as err:
        raise BundleError(
            f"family {record.family}: image {record.image_id} cannot be saved from the engine: {err}; "
            f"rebuild it (`milebench image build --family {record.family}`) and re-run the run's jobs"
        ) from None
    log.info(
        "family %s: saved %s (%d bytes) -> %s", record.family, record.image_id, dest.stat().st_size, dest
    )


def archive_problems(archive: Path, image_id: str) -> list[str]:
    """What in a ``docker save`` archive does not hash to the recorded id: its config, then each layer
    against the config's ``diff_ids`` (the sha256 of the uncompressed layer tar)."""
    try:
        with tarfile.open(archive) as tar:
            (entry,) = json.load(member(tar, "manifest.json"))
            config_bytes = member(tar, entry["Config"]).read()
            if hashlib.sha256(config_bytes).hexdigest() != image_id.removeprefix("sha256:"):
                return [f"its config {entry['Config']} does not hash to the recorded id {image_id}"]
            diff_ids = json.loads(config_bytes)["rootfs"]["diff_ids"]
            if len(diff_ids) != len(entry["Layers"]):
                return [f"{len(entry['Layers'])} layers, the config names {len(diff_ids)}"]
            return [
                f"layer {i} ({name}) does not match the config's {diff_id}"
                for i, (name, diff_id) in enumerate(zip(entry["Layers"], diff_ids, strict=True), start=1)
                if layer_digest(member(tar, name)) != diff_id
            ]
    except (tarfile.TarError, OSError, KeyError, TypeError, ValueError) as err:
        return [f"not a readable `docker save` archive: {err}"]


def member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    fh = tar.extractfile(name)
    if fh is None:
        raise KeyError(f"{name} is not a file")
    return fh


def layer_digest(fh: IO[bytes]) -> str:
    """``sha256:<hex>`` of the layer as a tar, gunzipped first when the archive stores it compressed (a
    stream that does not decompress has no digest and matches nothing)."""
    compressed = fh.read(2) == GZIP_MAGIC
    fh.seek(0)
    stream: IO[bytes] | gzip.GzipFile = gzip.GzipFile(fileobj=fh) if compressed else fh
    digest = hashlib.sha256()
    try:
        for block in iter(lambda: stream.read(CHUNK), b""):
            digest.update(block)
    except (zlib.error, EOFError, gzip.BadGzipFile):
        return "a corrupt gzip stream"
    return f"sha256:{digest.hexdigest()}"


def load_image(client: docker.DockerClient, archive: Path) -> str:
    """``docker load`` of one archive; the id the engine reports, or a BundleError with its reason."""
    loaded: list[str] = []
    try:
        with open(archive, "rb") as fh:
            for message in client.api.load_image(fh):
                loaded += messages_ids(message, archive)
    except APIError as err:
        raise BundleError(f"{archive}: the engine refused to load it: {err.explanation or err}") from None
    except RequestException as err:
        raise BundleError(f"{archive}: loading it failed: {err}") from None
    if len(loaded) != 1:
        raise BundleError(f"{archive}: loading it gave {len(loaded)} images, not one")
    return loaded[0]


def messages_ids(message: dict[str, Any], archive: Path) -> list[str]:
    """Image ids in one progress message of a load; an error message raises."""
    if "error" in message:
        raise BundleError(f"{archive}: the engine refused to load it: {str(message['error']).strip()}")
    return LOADED.findall(str(message.get("stream", "")))
