"""``milebench image prune``: remove the family images a checkout no longer uses.

Every source change builds a new ``milebench-<family>:<key>`` image and leaves the previous one on the
engine, so a working copy collects gigabytes of superseded images. An image is removed only when its
staleness is proven: its tag is one ``image build`` gives (``milebench-<family>:<12 hex digits>``, never a
tag a user chose), its family has a record under the ``--records`` folders (``results/images/`` of the
working folder by default; a checkout's runs in other folders name theirs), and no record names it. So a
records folder that does not exist, or a record that does not parse, refuses the whole prune (nothing
would then prove which image is current), and a family no record names keeps all its images. An image a
container still uses is kept and named; bundles hold their own copies.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import APIError

from milebench.containers.image import ImageError, is_kit_tag, parse_record, record_path

log = logging.getLogger(__name__)

MIB = 1024 * 1024


@dataclass(frozen=True)
class Stale:
    """A family image no record names."""

    tag: str
    image_id: str
    size: int


def recorded_images(families: Sequence[str], folders: Sequence[Path]) -> dict[str, set[str]]:
    """Each family with a record in ``folders`` -> the image ids they name; an ImageError names a folder
    that does not exist or a record that does not parse."""
    missing = [str(folder) for folder in folders if not folder.is_dir()]
    if missing:
        raise ImageError(
            f"--records {', '.join(missing)}: no such folder, so no record proves any image stale (without "
            "--records: results/images/ of the working folder): run it where the image records are, or name "
            "their folders with --records"
        )
    found: dict[str, set[str]] = {}
    for folder in folders:
        for name in families:
            record = parse_record(record_path(name, folder))
            if record is not None:
                found.setdefault(name, set()).add(record.image_id)
    return found


def proven_stale(family: str, tag: str, image_id: str, recorded: Mapping[str, set[str]]) -> bool:
    """A tag ``image build`` gave, of a family with records, on an image none of the records names."""
    kept = set().union(*recorded.values())
    return family in recorded and is_kit_tag(tag, family) and image_id not in kept


def stale_images(client: docker.DockerClient, recorded: Mapping[str, set[str]]) -> list[Stale]:
    """Every tag of a recorded family that is proven stale."""
    stale = []
    for name in sorted(recorded):
        for found in client.images.list(name=f"milebench-{name}"):
            image, size = str(found.id), int(found.attrs.get("Size", 0))
            tags = [tag for tag in found.tags if proven_stale(name, tag, image, recorded)]
            stale += [Stale(tag, image, size) for tag in tags]
    return sorted(stale, key=lambda s: s.tag)


def prune(
    client: docker.DockerClient, recorded: Mapping[str, set[str]], *, dry_run: bool = False
) -> tuple[list[Stale], list[tuple[Stale, str]]]:
    """Remove (or, with ``dry_run``, list) the stale family images; the removed and the kept with why."""
    stale = stale_images(client, recorded)
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
