"""``milebench image prune``: remove the family images a checkout no longer uses.

Every source change builds a new ``milebench-<family>:<key>`` image and leaves the previous one on the
engine, so a working copy collects gigabytes of superseded images. The images kept are the ones recorded
under each ``--records`` folder (``results/images/`` of the working folder by default; a checkout's runs in
other folders name theirs); every other ``milebench-<family>:*`` tag of a family under ``containers/`` is
removed. An image a container still uses is kept and named; bundles hold their own copies.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import APIError

from milebench.containers.image import (
    RECORDS_DIR,
    REPO_ROOT,
    known_families,
    read_record,
    record_path,
)

log = logging.getLogger(__name__)

MIB = 1024 * 1024


@dataclass(frozen=True)
class Stale:
    """A family image no record names."""

    tag: str
    image_id: str
    size: int


def recorded_ids(families: Sequence[str], folders: Sequence[Path]) -> set[str]:
    """The image ids the records in ``folders`` name (absent or unreadable records name none)."""
    found = set()
    for folder in folders:
        for name in families:
            record = read_record(record_path(name, folder))
            if record is not None:
                found.add(record.image_id)
    return found


def stale_images(client: docker.DockerClient, families: Sequence[str], keep: set[str]) -> list[Stale]:
    """Every ``milebench-<family>:*`` tag whose image is not one of ``keep``."""
    stale = []
    for name in families:
        for found in client.images.list(name=f"milebench-{name}"):
            image_id = str(found.id)
            if image_id in keep:
                continue
            size = int(found.attrs.get("Size", 0))
            ours = [tag for tag in found.tags if tag.startswith(f"milebench-{name}:")]
            stale += [Stale(tag, image_id, size) for tag in ours]
    return sorted(stale, key=lambda s: s.tag)


def prune(
    client: docker.DockerClient,
    *,
    records: Sequence[Path] = (RECORDS_DIR,),
    root: Path = REPO_ROOT,
    dry_run: bool = False,
) -> tuple[list[Stale], list[tuple[Stale, str]]]:
    """Remove (or, with ``dry_run``, list) the stale family images; the removed and the kept with why."""
    families = known_families(root)
    stale = stale_images(client, families, recorded_ids(families, records))
    if dry_run:
        return stale, []
    removed, kept = [], []
    for image in stale:
        try:
            client.images.remove(image.tag)
        except APIError as err:
            kept.append((image, str(err.explanation or err)))
            continue
        removed.append(image)
    return removed, kept
