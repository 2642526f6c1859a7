"""Where the files of a run go in its bundle, and what the core takes of every benchmark's run alike.

The bundle keeps the run's own layout under ``run/`` (``results/<run>/``, ``reports/<run>/``, the image
records in ``results/images/``), so ``milebench verify`` can re-run the kit's commands on it as is, and the
whole specs folder the run was given under ``specs/``. Caches and re-creatable bulk stay out; which files
of its results a run's bundle holds is its benchmark's to say (``hooks.BundleHooks.contents``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from milebench.archive.badges import Role
from milebench.archive.hooks import Item, Stamp
from milebench.archive.manifest import RUN_ROOT, SPECS, BundleError
from milebench.paths import RunFolder
from milebench.provenance import UNKNOWN
from milebench.spec.folder import overlay_base

log = logging.getLogger(__name__)

PROVENANCE_SUFFIX = ".provenance.json"
SKIPPED_SUFFIXES = (".lock", ".tmp", ".part", ".corrupt")


def skipped(rel: PurePosixPath) -> bool:
    """Hidden files (Snakemake's markers, atomic-write scratch) and cell locks are never evidence."""
    return any(part.startswith(".") for part in rel.parts) or rel.name.endswith(SKIPPED_SUFFIXES)


def layout(run: str, out_dir: Path | str) -> PurePosixPath:
    """Where the run's results folder lies inside ``run/``; refuses a folder that only this machine has."""
    out = PurePosixPath(out_dir)
    if out.is_absolute() or ".." in out.parts:
        raise BundleError(
            f"run {run}: output_dir {out_dir} is not a relative path inside the working folder: a "
            "bundle re-checks the run under another folder, so archive a run with a relative output_dir"
        )
    return out


def files_under(folder: Path) -> list[Path]:
    """Every file below ``folder``, through linked folders too: a specs folder that links its tasks or
    models to another checkout must not leave them out of the bundle (``Path.rglob`` does not follow
    them before Python 3.13)."""
    found = (Path(top, name) for top, _, names in os.walk(folder, followlinks=True) for name in names)
    return sorted(p for p in found if p.is_file())


Classify = Callable[[PurePosixPath], tuple[Role, str] | None]
"""A file of the results folder (relative to it) -> its role and the command that wrote it; None: left out."""


def run_items(run: str, out_dir: Path | str, paths: RunFolder, classify: Classify, report: str) -> list[Item]:
    """The run's results (``paths.out``, the run spec's ``out_dir``), as ``classify`` takes them, and its
    report folder, written by the command ``report``."""
    out, items = layout(run, out_dir), []
    for path in files_under(paths.out):
        rel = PurePosixPath(path.relative_to(paths.out).as_posix())
        found = None if skipped(rel) else classify(rel)
        if found is not None:
            items.append(Item(path, f"{RUN_ROOT}/{out / rel}", *found))
    for path in files_under(paths.reports):
        rel = PurePosixPath(path.relative_to(paths.reports).as_posix())
        if not skipped(rel):
            role = Role.FIGURE if rel.parts[0] == "figures" else Role.REPORT
            items.append(Item(path, f"{RUN_ROOT}/reports/{run}/{rel}", role, report))
    return items


def spec_files(root: Path, run_spec: PurePosixPath) -> list[Item]:
    """The whole specs folder the run used: its run spec (``run_spec``, relative to ``root``), models,
    tasks, paper numbers and locks; of an overlay, its own files and the shipped files it does not replace,
    so the bundle's folder is whole."""
    items, base = [], overlay_base(root)
    found = {} if base is None else {p.relative_to(base): p for p in files_under(base)}
    found |= {p.relative_to(root): p for p in files_under(root)}
    for relative, path in sorted(found.items()):
        rel = PurePosixPath(relative.as_posix())
        if skipped(rel) or "__pycache__" in rel.parts:
            continue
        role = Role.RUN_SPEC if rel == run_spec else Role.SPEC
        role = Role.LOCK if rel.parts[0] == "locks" else role
        items.append(Item(path, f"{SPECS}/{rel}", role, "the specs folder the run was given (--specs)"))
    return items


def kit_commits(stamps: list[Stamp]) -> tuple[tuple[str, ...], bool]:
    """The commits the jobs ran at, and whether any ran from a dirty checkout."""
    unknown = [str(s.path) for s in stamps if s.commit == UNKNOWN]
    if unknown:
        raise BundleError(
            f"{unknown[0]}: kit commit unknown (ran outside a git checkout): no source to archive"
        )
    return tuple(sorted({s.commit for s in stamps})), any(s.dirty for s in stamps)
