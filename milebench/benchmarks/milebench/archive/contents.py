"""Which files of a MileBench run go into its bundle, what each is and which command wrote it.

Of the results folder: the predictions, journals, judgments, task scores, aggregate, verdict, prepared
sets, fetch manifest, data lock, job records and logs; caches and re-creatable bulk stay out (the
extracted data tree, download scratch, locks of busy cells, Snakemake's timing tables). Data archives and
weights come in only when asked for, each verified first.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path, PurePosixPath

from milebench.archive.badges import Role
from milebench.archive.contents import PROVENANCE_SUFFIX, files_under, layout, run_items, skipped
from milebench.archive.hooks import Item
from milebench.archive.manifest import RUN_ROOT, WEIGHTS, BundleError
from milebench.archive.weights import hub_snapshot
from milebench.benchmarks.milebench.data.sources import resolve_source
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.provenance import JobProvenance, read_provenance
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.io import sha256_file
from milebench.spec.model import HubWeights, TinyWeights
from milebench.spec.pinned_file import ArchiveEntry

log = logging.getLogger(__name__)


def cell_command(stage: str, run: str, model: str, mode: str, task: str) -> str:
    return f"milebench {stage} --run {run} --model {model} --task {task} --mode {mode}"


def classify(rel: PurePosixPath, run: str) -> tuple[Role, str] | None:
    """Role and writing command of a file under ``results/<run>/``; None for what stays out."""
    parts, name = rel.parts, rel.name
    if len(parts) == 1 and name in ("aggregate.json", "verdict.json"):
        return (
            Role.AGGREGATE if name == "aggregate.json" else Role.VERDICT
        ), f"milebench aggregate --run {run}"
    if parts == ("data", "fetch.json"):
        return Role.FETCH_MANIFEST, f"milebench fetch --run {run}"
    if parts == ("mirror", "milebench.lock.yaml"):
        return Role.LOCK, "milebench fixture (the run's generated data archives and their lock)"
    if len(parts) == 3 and parts[0] == "logs":
        return Role.LOG, f"snakemake rule {parts[1]} (log of {name.removesuffix('.log')})"
    if len(parts) >= 4 and parts[0] in ("prepared", "tiles"):
        task = parts[3] if parts[0] == "tiles" else name.split(".")[0]
        return Role.PREPARED, (
            f"milebench preprocess --run {run} --task {task} --mode {parts[1]} --regime {parts[2]}"
        )
    if len(parts) != 4 or parts[0] not in ("predictions", "journal", "scores"):
        return None
    model, mode = parts[1], parts[2]
    task = name.split(".")[0]
    if parts[0] == "scores":
        role = {".jsonl": Role.JUDGMENT, ".json": Role.TASK_SCORE}.get(
            "" if name.endswith(PROVENANCE_SUFFIX) else PurePosixPath(name).suffix, Role.PROVENANCE
        )
        return role, cell_command("score", run, model, mode, task)
    if parts[0] == "journal" and not name.endswith(".jsonl"):
        return None
    role = Role.PROVENANCE if name.endswith(PROVENANCE_SUFFIX) else Role.PREDICTION
    return (Role.JOURNAL if parts[0] == "journal" else role), cell_command("infer", run, model, mode, task)


def run_files(run: RunSpec, paths: RunPaths) -> list[Item]:
    """The run's results and its report."""
    report = f"milebench report --run {run.name}"
    items = run_items(run.name, run.out, paths, partial(classify, run=run.name), report)
    required = (paths.aggregate_json, paths.report_html, paths.fetch_manifest)
    missing = [str(p) for p in required if p not in {i.source for i in items}]
    if missing:
        raise BundleError(
            f"run {run.name}: {', '.join(missing)} missing: finish the run first (`snakemake --config "
            f"run={run.name}`)"
        )
    return items


def provenance_records(paths: RunPaths) -> list[tuple[Path, JobProvenance]]:
    """Every job manifest of the run, read strictly: a bundle must not carry an unreadable one."""
    found = []
    for path in files_under(paths.out):
        if path.name.endswith(PROVENANCE_SUFFIX):
            try:
                found.append((path, read_provenance(path)))
            except ValueError as err:
                raise BundleError(str(err)) from None
    if not found:
        raise BundleError(f"{paths.out}: no job provenance records: nothing shows how this run was made")
    return found


def data_archives(specs: Specs, run: RunSpec, paths: RunPaths) -> list[Item]:
    """The run's data archives, each verified against the data lock before it is bundled."""
    source = resolve_source(specs, run, paths)
    if not source.archives:
        raise BundleError(
            f"run {run.name}: its data ({run.data.kind}) has no archives to bundle (--with-data)"
        )
    items = []
    for entry, _ in source.archives:
        items.append(
            Item(
                verified_archive(entry, paths),
                f"{RUN_ROOT}/{layout(run.name, run.out)}/downloads/{entry.name}",
                Role.DATA_ARCHIVE,
                f"milebench fetch --run {run.name} (verified against its lock)",
            )
        )
    return items


def verified_archive(entry: ArchiveEntry, paths: RunPaths) -> Path:
    """The downloaded (or, for fixture data, generated) archive, checked against its lock entry."""
    for path in (paths.downloads / entry.name, paths.mirror / entry.name):
        if path.is_file():
            size, digest = path.stat().st_size, sha256_file(path)
            if (size, digest) != (entry.size, entry.sha256):
                raise BundleError(
                    f"{path}: does not match the data lock ({entry.size} bytes, sha256 {entry.sha256}): "
                    f"{size} bytes, sha256 {digest}"
                )
            return path
    raise BundleError(f"{paths.downloads / entry.name}: missing: fetch the data again (`milebench fetch`)")


def weight_files(
    specs: Specs, run: RunSpec, paths: RunPaths, records: list[JobProvenance], cache: Path | None
) -> list[Item]:
    """Tiny checkpoints from the run's folder; hub weights from the local cache at the revision the
    run's infer jobs recorded, each file checked against the hash the hub named its blob by."""
    items = []
    for model in specs.run_models(run):
        if isinstance(model.weights, TinyWeights):
            folder = paths.model_dir(model.name)
            if not folder.is_dir():
                raise BundleError(
                    f"{folder}: missing: build it with "
                    f"`milebench tiny-model --run {run.name} --model {model.name}`"
                )
            for path in files_under(folder):
                rel = PurePosixPath(path.relative_to(paths.out).as_posix())
                if not skipped(rel):
                    items.append(
                        Item(
                            path,
                            f"{RUN_ROOT}/{layout(run.name, run.out) / rel}",
                            Role.WEIGHTS,
                            f"milebench tiny-model --run {run.name} --model {model.name}",
                        )
                    )
        elif isinstance(model.weights, HubWeights):
            revisions = {r.weights_revision for r in records if r.model == model.name and r.stage == "infer"}
            for rel, path in hub_snapshot(cache, model.weights.repo_id, revisions, model.name):
                items.append(
                    Item(
                        path,
                        f"{WEIGHTS}/{rel}",
                        Role.WEIGHTS,
                        f"the Hugging Face cache ({model.weights.repo_id} at {rel.parts[3]})",
                    )
                )
        else:
            log.info("model %s: %s weights, nothing to bundle", model.name, model.weights.kind)
    return items
