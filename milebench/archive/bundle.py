"""``milebench archive``: pack a finished run with its exact environments into one bundle folder.

The bundle is built in a scratch folder beside ``--out`` and renamed into place when complete, so a
folder named like a bundle is always a whole one. Nothing in it depends on the moment or the machine
that packed it (no archiving time, sorted manifest, images saved by id), so archiving the same run twice
gives the same bytes, and the bundle's id, the sha256 of its manifest, names its content.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from milebench.archive.badges import Role
from milebench.archive.contents import kit_commits, spec_files
from milebench.archive.crate import CRATE, write_crate
from milebench.archive.hooks import Item, Options, RunContents, Stamp, hooks_of
from milebench.archive.images import ENGINE_TIMEOUT_S, image_file, save_image
from milebench.archive.manifest import (
    RUN_ROOT,
    SPECS,
    BundleError,
    Entry,
    ImageEntry,
    Manifest,
    entry,
    write_manifest,
)
from milebench.archive.sbom import image_sbom, sbom_file, tool_tree
from milebench.archive.source import is_workflow, write_source
from milebench.archive.tarball import write_tarball
from milebench.containers.image import RECORDS_DIR, ImageRecord, client_from_env, read_record, record_path
from milebench.spec.benchmark import Benchmark

log = logging.getLogger(__name__)


def image_records(families: list[str], root: Path) -> list[ImageRecord]:
    records = []
    for family in families:
        path = record_path(family, root / RECORDS_DIR)
        record = read_record(path)
        if record is None:
            raise BundleError(
                f"{path}: no image recorded for family {family}: build it (`milebench image build --family "
                f"{family}`), or archive with --no-images"
            )
        records.append(record)
    return records


def check_images_ran(records: list[ImageRecord], stamps: list[Stamp]) -> None:
    """A job that ran in an image must have run in one of the images the bundle carries."""
    carried = {r.image_id for r in records}
    for stamp in stamps:
        image = stamp.image_id
        if image is not None and image not in carried:
            raise BundleError(
                f"{stamp.path}: the job ran in image {image}, not the recorded image of its family "
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


def add_images(records: list[ImageRecord], bundle: Path, root: Path) -> tuple[list[ImageEntry], list[Entry]]:
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


def build(
    benchmark: str,
    run: str,
    contents: RunContents,
    specs: list[Item],
    root: Path,
    bundle: Path,
    options: Options,
) -> Manifest:
    """Fill the empty folder ``bundle`` with the run; returns its manifest (written last)."""
    stamps = contents.stamps
    if not stamps:
        raise BundleError(f"run {run}: no job provenance records: nothing shows how this run was made")
    commits, dirty = kit_commits(stamps)
    if dirty:
        log.warning(
            "run %s: some jobs ran from a checkout with uncommitted changes; the bundled source is "
            "their commit, not exactly what ran",
            run,
        )
    records = image_records(contents.families, root) if options.images else []
    if options.images:
        check_images_ran(records, stamps)
    entries = copy_items(contents.items + specs, bundle)
    entries += [
        entry(bundle, path, Role.WORKFLOW if is_workflow(path) else Role.SOURCE, how)
        for path, how in write_source(commits, bundle)
    ]
    images: list[ImageEntry] = []
    if records:
        images, image_entries = add_images(records, bundle, root)
        entries += image_entries
    write_crate(
        bundle,
        contents.title,
        run,
        sorted(entries, key=lambda e: e.path),
        images,
        min(s.started_at for s in stamps),
        max(s.finished_at for s in stamps),
    )
    entries.append(entry(bundle, CRATE, Role.CRATE, "milebench archive (rocrate, Workflow Run Crate)"))
    return Manifest(
        benchmark=benchmark,
        run=run,
        specs=SPECS,
        root=RUN_ROOT,
        kit_commits=commits,
        dirty=dirty,
        images=tuple(images),
        with_data=options.with_data,
        with_weights=options.with_weights,
        files=tuple(entries),
    )


def run_spec_path(benchmark: Benchmark, specs_root: Path, run: str) -> PurePosixPath:
    """The run spec's path in the specs folder (a benchmark's own folder lies under it)."""
    runs = benchmark.runs_folder(specs_root)
    folder = runs.relative_to(specs_root) if runs.is_relative_to(specs_root) else Path("runs")
    return PurePosixPath(folder.as_posix(), f"{run}.yaml")


def archive_run(
    benchmark: Benchmark, specs_root: Path, run: str, root: Path, out: Path, options: Options
) -> str:
    """Write the bundle of ``run`` to ``out`` (refused if it exists); returns the bundle's id."""
    if out.exists():
        raise BundleError(f"{out}: already exists: choose a new folder (a bundle is never overwritten)")
    contents = hooks_of(benchmark.name, f"run {run}").contents(specs_root, run, root, options)
    specs = spec_files(specs_root, run_spec_path(benchmark, specs_root, run))
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        manifest = build(benchmark.name, run, contents, specs, root, scratch, options)
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
