"""Family images out of the engine into the bundle (``docker save``) and back in (``docker load``).

An image is saved by its id, so the archive carries no tag, and the engine writes the same bytes every
time. Loading never pulls: the id the engine reports for the loaded archive must be the recorded one,
which is the sha256 of the image's config, itself naming every layer's digest.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, ImageNotFound
from requests.exceptions import RequestException

from milebench.archive.manifest import BundleError
from milebench.containers.image import ImageRecord

log = logging.getLogger(__name__)

IMAGES = "images"
ENGINE_TIMEOUT_S = 1800
"""Per API call: saving, loading or starting a container of a multi-gigabyte image can take minutes."""
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
