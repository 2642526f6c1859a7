"""Which files of a run go into its bundle, where they go, what they are and which command wrote them.

The bundle keeps the run's own layout under ``run/`` (``results/<run>/``, ``reports/<run>/``, the image
records in ``results/images/``), so ``milebench verify`` can re-run the kit's commands on it as is. Caches
and re-creatable bulk stay out: the extracted data tree, download scratch, lock files of busy cells,
Snakemake's timing tables. Data archives and weights come in only when asked for, verified first.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from milebench.benchmarks.milebench.archive.badges import Role
from milebench.benchmarks.milebench.archive.manifest import BundleError
from milebench.benchmarks.milebench.archive.weights import hub_snapshot
from milebench.benchmarks.milebench.data.sources import resolve_source
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.provenance import JobProvenance, read_provenance
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.io import sha256_file
from milebench.provenance import UNKNOWN
from milebench.spec.model import HubWeights, TinyWeights
from milebench.spec.pinned_file import ArchiveEntry

log = logging.getLogger(__name__)

RUN_ROOT = "run"
SPECS = "specs"
WEIGHTS = "weights"
"""The Hugging Face home of hub weights in a bundle (mounted at /models in the images)."""
PROVENANCE_SUFFIX = ".provenance.json"
SKIPPED_SUFFIXES = (".lock", ".tmp", ".part", ".corrupt")


@dataclass(frozen=True)
class Item:
    """One file to copy into the bundle."""

    source: Path
    dest: str
    role: Role
    produced_by: str


def skipped(rel: PurePosixPath) -> bool:
    """Hidden files (Snakemake's markers, atomic-write scratch) and cell locks are never evidence."""
    return any(part.startswith(".") for part in rel.parts) or rel.name.endswith(SKIPPED_SUFFIXES)


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


def layout(run: RunSpec) -> PurePosixPath:
    """Where the run's results folder lies inside ``run/``; refuses a folder that only this machine has."""
    out = PurePosixPath(run.out)
    if out.is_absolute() or ".." in out.parts:
        raise BundleError(
            f"run {run.name}: output_dir {run.out} is not a relative path inside the working folder: a "
            "bundle re-checks the run under another folder, so archive a run with a relative output_dir"
        )
    return out


def files_under(folder: Path) -> list[Path]:
    """Every file below ``folder``, through linked folders too: a specs folder that links its tasks or
    models to another checkout must not leave them out of the bundle (``Path.rglob`` does not follow
    them before Python 3.13)."""
    found = (Path(top, name) for top, _, names in os.walk(folder, followlinks=True) for name in names)
    return sorted(p for p in found if p.is_file())


def run_files(run: RunSpec, paths: RunPaths) -> list[Item]:
    """The run's results and its report."""
    out, items = layout(run), []
    for path in files_under(paths.out):
        rel = PurePosixPath(path.relative_to(paths.out).as_posix())
        found = None if skipped(rel) else classify(rel, run.name)
        if found is not None:
            items.append(Item(path, f"{RUN_ROOT}/{out / rel}", *found))
    for path in files_under(paths.reports):
        rel = PurePosixPath(path.relative_to(paths.reports).as_posix())
        if not skipped(rel):
            role = Role.FIGURE if rel.parts[0] == "figures" else Role.REPORT
            items.append(
                Item(path, f"{RUN_ROOT}/reports/{run.name}/{rel}", role, f"milebench report --run {run.name}")
            )
    required = (paths.aggregate_json, paths.report_html, paths.fetch_manifest)
    missing = [str(p) for p in required if p not in {i.source for i in items}]
    if missing:
        raise BundleError(
            f"run {run.name}: {', '.join(missing)} missing: finish the run first (`snakemake --config "
            f"run={run.name}`)"
        )
    return items


def spec_files(specs: Specs, run: RunSpec) -> list[Item]:
    """The whole specs folder the run used: its run spec, models, tasks, paper numbers and locks; of an
    overlay, its own files and the shipped files it does not replace, so the bundle's folder is whole."""
    items = []
    found = {} if specs.base is None else {p.relative_to(specs.base): p for p in files_under(specs.base)}
    found |= {p.relative_to(specs.root): p for p in files_under(specs.root)}
    for relative, path in sorted(found.items()):
        rel = PurePosixPath(relative.as_posix())
        if skipped(rel) or "__pycache__" in rel.parts:
            continue
        role = Role.RUN_SPEC if rel == PurePosixPath("runs", f"{run.name}.yaml") else Role.SPEC
        role = Role.LOCK if rel.parts[0] == "locks" else role
        items.append(Item(path, f"{SPECS}/{rel}", role, "the specs folder the run was given (--specs)"))
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


def kit_commits(records: list[tuple[Path, JobProvenance]]) -> tuple[tuple[str, ...], bool]:
    """The commits the jobs ran at, and whether any ran from a dirty checkout."""
    unknown = [str(path) for path, r in records if r.kit.commit == UNKNOWN]
    if unknown:
        raise BundleError(
            f"{unknown[0]}: kit commit unknown (ran outside a git checkout): no source to archive"
        )
    return tuple(sorted({r.kit.commit for _, r in records})), any(r.kit.dirty for _, r in records)


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
                f"{RUN_ROOT}/{layout(run)}/downloads/{entry.name}",
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
                            f"{RUN_ROOT}/{layout(run) / rel}",
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
