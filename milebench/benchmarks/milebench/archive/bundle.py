"""``milebench archive``: pack a finished run with its exact environments into one bundle folder.

The bundle is built in a scratch folder beside ``--out`` and renamed into place when complete, so a
folder named like a bundle is always a whole one. Nothing in it depends on the moment or the machine
that packed it (no archiving time, sorted manifest, images saved by id), so archiving the same run twice
gives the same bytes, and the bundle's id, the sha256 of its manifest, names its content.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.milebench.archive.badges import Role
from milebench.benchmarks.milebench.archive.contents import (
    RUN_ROOT,
    SPECS,
    Item,
    data_archives,
    kit_commits,
    layout,
    provenance_records,
    run_files,
    spec_files,
    weight_files,
)
from milebench.benchmarks.milebench.archive.crate import CRATE, write_crate
from milebench.benchmarks.milebench.archive.images import ENGINE_TIMEOUT_S, image_file, save_image
from milebench.benchmarks.milebench.archive.manifest import (
    BundleError,
    Entry,
    ImageEntry,
    Manifest,
    entry,
    write_manifest,
)
from milebench.benchmarks.milebench.archive.sbom import image_sbom, sbom_file, tool_tree
from milebench.benchmarks.milebench.archive.source import is_workflow, write_source
from milebench.benchmarks.milebench.archive.tarball import write_tarball
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.provenance import JobProvenance
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.containers.docker_runtime import default_model_cache
from milebench.containers.image import RECORDS_DIR, ImageRecord, client_from_env, read_record, record_path

log = logging.getLogger(__name__)

KIT_FAMILY = "kit"


@dataclass(frozen=True)
class Options:
    with_data: bool = False
    with_weights: bool = False
    images: bool = True
    """False: no image, no SBOM (a bundle for the hash checks only; verify then fails its image checks)."""
    tarball: bool = False


def families(specs: Specs, run: RunSpec) -> list[str]:
    """The images the run's jobs need: the kit's (every job but inference) and each model's family."""
    return sorted({KIT_FAMILY} | {m.container for m in specs.run_models(run) if m.container})


def image_records(specs: Specs, run: RunSpec, root: Path) -> list[ImageRecord]:
    records = []
    for family in families(specs, run):
        path = record_path(family, root / RECORDS_DIR)
        record = read_record(path)
        if record is None:
            raise BundleError(
                f"{path}: no image recorded for family {family}: build it (`milebench image build --family "
                f"{family}`), or archive with --no-images"
            )
        records.append(record)
    return records


def check_images_ran(records: list[ImageRecord], provenance: list[tuple[Path, JobProvenance]]) -> None:
    """A job that ran in an image must have run in one of the images the bundle carries."""
    carried = {r.image_id for r in records}
    for path, record in provenance:
        image = record.environment.image_id
        if image is not None and image not in carried:
            raise BundleError(
                f"{path}: the job ran in image {image}, not the recorded image of its family "
                f"({', '.join(sorted(carried))}): rebuild and re-run, or record that image"
            )


def copy_items(items: list[Item], bundle: Path) -> list[Entry]:
    entries = []
    for item in sorted(items, key=lambda i: i.dest):
        target = bundle / item.dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(item.source, target)
        entries.append(entry(bundle, item.dest, item.role, item.produced_by))
    return entries


def add_images(
    records: list[ImageRecord], bundle: Path, root: Path, run: RunSpec
) -> tuple[list[ImageEntry], list[Entry]]:
    """Each image saved by id, its record, and its SBOM made inside it."""
    client = client_from_env(ENGINE_TIMEOUT_S)
    images, entries = [], []
    with tempfile.TemporaryDirectory(prefix="milebench-sbom-tool-") as tmp:
        tool = tool_tree(Path(tmp))
        for record in records:
            save_image(client, record, bundle / image_file(record.image_id))
            image_sbom(client, record, bundle / sbom_file(record.family), tool)
            record_dest = f"{RUN_ROOT}/{RECORDS_DIR.as_posix()}/{record.family}.json"
            (bundle / record_dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(record_path(record.family, root / RECORDS_DIR), bundle / record_dest)
            entries += [
                entry(bundle, image_file(record.image_id), Role.IMAGE, f"docker save {record.image_id}"),
                entry(
                    bundle,
                    sbom_file(record.family),
                    Role.SBOM,
                    f"cyclonedx-py environment in {record.image_id}",
                ),
                entry(
                    bundle, record_dest, Role.IMAGE_RECORD, f"milebench image build --family {record.family}"
                ),
            ]
            images.append(
                ImageEntry(
                    family=record.family,
                    image_id=record.image_id,
                    file=image_file(record.image_id),
                    sbom=sbom_file(record.family),
                )
            )
    return images, entries


def build(specs: Specs, run: RunSpec, root: Path, bundle: Path, options: Options) -> Manifest:
    """Fill the empty folder ``bundle`` with the run; returns its manifest (written last)."""
    paths = RunPaths.for_run(run, base=root)
    provenance = provenance_records(paths)
    commits, dirty = kit_commits(provenance)
    if dirty:
        log.warning(
            "run %s: some jobs ran from a checkout with uncommitted changes; the bundled source is "
            "their commit, not exactly what ran",
            run.name,
        )
    records = image_records(specs, run, root) if options.images else []
    if options.images:
        check_images_ran(records, provenance)
    items = run_files(run, paths) + spec_files(specs, run)
    if options.with_data:
        items += data_archives(specs, run, paths)
    if options.with_weights:
        items += weight_files(specs, run, paths, [r for _, r in provenance], default_model_cache(os.environ))
    entries = copy_items(items, bundle)
    entries += [
        entry(bundle, path, Role.WORKFLOW if is_workflow(path) else Role.SOURCE, how)
        for path, how in write_source(commits, bundle)
    ]
    images: list[ImageEntry] = []
    if records:
        images, image_entries = add_images(records, bundle, root, run)
        entries += image_entries
    times = [r for _, r in provenance]
    write_crate(
        bundle,
        run.name,
        sorted(entries, key=lambda e: e.path),
        images,
        min(r.started_at for r in times),
        max(r.finished_at for r in times),
    )
    entries.append(entry(bundle, CRATE, Role.CRATE, "milebench archive (rocrate, Workflow Run Crate)"))
    return Manifest(
        run=run.name,
        specs=SPECS,
        root=RUN_ROOT,
        kit_commits=commits,
        dirty=dirty,
        images=tuple(images),
        with_data=options.with_data,
        with_weights=options.with_weights,
        files=tuple(entries),
    )


def archive_run(specs: Specs, run: RunSpec, root: Path, out: Path, options: Options) -> str:
    """Write the bundle of ``run`` to ``out`` (refused if it exists); returns the bundle's id."""
    layout(run)
    if out.exists():
        raise BundleError(f"{out}: already exists: choose a new folder (a bundle is never overwritten)")
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        manifest = build(specs, run, root, scratch, options)
        bundle = write_manifest(scratch, manifest)
        scratch.rename(out)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    log.info("bundle %s: %d files -> %s", bundle, len(manifest.files) + 1, out)
    if options.tarball:
        tarball = write_tarball(out, out.with_name(f"{out.name}.tar"))
        log.info("tarball -> %s", tarball)
    return bundle
