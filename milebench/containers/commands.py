"""``milebench image build``, ``prune`` and ``uri``: the model families' container images."""

from __future__ import annotations

import argparse
import logging
import sys

from milebench.containers.image import (
    RECORDS_DIR,
    ImageError,
    build_image,
    client_from_env,
    known_families,
    registry_uri,
)

log = logging.getLogger(__name__)


def image_build(args: argparse.Namespace) -> int:
    try:
        build_image(args.family, base=args.base, ca_bundle=args.ca_bundle)
    except ImageError as err:
        log.error("%s", err)
        return 1
    return 0


def image_prune(args: argparse.Namespace) -> int:
    """Remove the family images proven stale by the records in ``--records`` (list them with ``--dry-run``);
    the records are read before the engine is asked, and one that cannot be refuses the prune (exit 2)."""
    from milebench.containers.prune import MIB, prune, recorded_images

    families = known_families()
    try:
        recorded = recorded_images(families, args.records or [RECORDS_DIR])
    except ImageError as err:
        log.error("milebench image prune: %s; nothing removed", err)
        return 2
    for name in sorted(set(families) - set(recorded)):
        log.info("family %s: no record, so no image of it is proven stale: all kept", name)
    try:
        done, kept = prune(client_from_env(), recorded, dry_run=args.dry_run)
    except ImageError as err:
        log.error("%s", err)
        return 1
    verb = "would remove" if args.dry_run else "removed"
    for image in done:
        log.info("%s %s (%s, %.1f MiB)", verb, image.tag, image.image_id[:19], image.size / MIB)
    for image, why in kept:
        log.warning("kept %s: %s", image.tag, why)
    total = sum(image.size for image in {i.image_id: i for i in done}.values()) / MIB
    log.info(
        "%s %d image tag(s), up to %.1f MiB (layers shared with kept images stay)", verb, len(done), total
    )
    return 0


def image_uri(args: argparse.Namespace) -> int:
    """Print the registry reference a family's image must be pushed to for deployment apptainer."""
    try:
        sys.stdout.write(registry_uri(args.registry, args.family) + "\n")
    except ImageError as err:
        log.error("%s", err)
        return 1
    return 0
