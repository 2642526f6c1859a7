"""``milebench verify``: re-check a bundle offline, on any machine with a Docker engine.

1. hashes: every file of the manifest is there with its size and sha256, and nothing else is;
2. images: each archived image is loaded from the bundle (never pulled) and gets its recorded id;
3. rescore: every prediction re-scored and the run re-aggregated in the archived kit image: every
   judgment, task score, aggregate value and verdict cell equals the archived one;
4. report: the report re-rendered there has the archived report's tables;
5. rerun: chosen or sampled inference cells re-run in their archived family images.

Every container runs with ``--network none``. A check that cannot run says why and does not pass.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import docker

from milebench.archive.badges import Role
from milebench.archive.compare import compare_json, compare_rows, compare_tables
from milebench.archive.hooks import Rerun, hooks_of
from milebench.archive.images import ENGINE_TIMEOUT_S, archive_problems, load_image
from milebench.archive.manifest import BundleError, Manifest, check_files, inside
from milebench.archive.workspace import Workspace, image_of, open_workspace, run_in_image
from milebench.containers.image import EngineUnavailable, client_from_env

log = logging.getLogger(__name__)

KIT_FAMILY = "kit"


class Check(StrEnum):
    HASHES = "hashes"
    IMAGES = "images"
    RESCORE = "rescore"
    REPORT = "report"
    RERUN = "rerun"


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not run"


@dataclass
class Outcome:
    check: Check
    status: Status = Status.PASSED
    evidence: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def fail(self, *problems: str) -> None:
        self.status = Status.FAILED
        self.problems += problems


@dataclass(frozen=True)
class VerifyOptions:
    checks: tuple[Check, ...] = tuple(Check)
    rerun: tuple[str, ...] = ()
    rerun_per_model: int = 1
    seed: int = 0
    gpus: str | None = None


def not_run(check: Check, reason: str) -> Outcome:
    return Outcome(check, Status.NOT_RUN, problems=[reason])


def check_hashes(bundle: Path, manifest: Manifest) -> Outcome:
    out = Outcome(Check.HASHES)
    problems = check_files(bundle, manifest)
    if problems:
        out.fail(*problems)
    size = sum(e.size for e in manifest.files)
    out.evidence.append(
        f"{len(manifest.files) - len(problems)} of {len(manifest.files)} files match the "
        f"manifest's sha256 ({size} bytes)"
    )
    return out


def check_images(client: docker.DockerClient, bundle: Path, manifest: Manifest) -> Outcome:
    out = Outcome(Check.IMAGES)
    if not manifest.images:
        return not_run(Check.IMAGES, "the bundle carries no image (archived with --no-images)")
    for image in manifest.images:
        archive = inside(bundle, image.file)
        problems = archive_problems(archive, image.image_id)
        if problems:
            out.fail(*(f"{image.file} ({image.family}): {p}" for p in problems))
            continue
        try:
            loaded = load_image(client, archive)
        except BundleError as err:
            out.fail(f"{image.file} ({image.family}): {err}")
            continue
        if loaded != image.image_id:
            out.fail(f"{image.file} ({image.family}): loaded as {loaded}, recorded {image.image_id}")
        else:
            out.evidence.append(
                f"{image.family}: config and every layer of {image.file} hash to the recorded "
                f"{image.image_id}; loaded as it"
            )
    return out


def compare_rescore(ws: Workspace, rescored: Mapping[Role, tuple[str, ...] | None]) -> Outcome:
    out = Outcome(Check.RESCORE)
    counts = dict.fromkeys(rescored, 0)
    for e in ws.manifest.files:
        if e.role not in rescored:
            continue
        counts[e.role] += 1
        old, new = ws.archived(e.path), ws.here(e.path)
        key = rescored[e.role]
        out.problems += compare_json(e.path, old, new) if key is None else compare_rows(e.path, old, new, key)
    if out.problems:
        out.status = Status.FAILED
    out.evidence.append(
        "re-scored in the archived kit image: "
        + ", ".join(f"{n} {role} file{'s' if n != 1 else ''}" for role, n in counts.items())
        + (" equal the archived ones" if not out.problems else " compared")
    )
    return out


def compare_report(ws: Workspace) -> Outcome:
    out = Outcome(Check.REPORT)
    for e in ws.manifest.files:
        if e.role is Role.REPORT:
            n, problems = compare_tables(e.path, ws.archived(e.path), ws.here(e.path))
            out.problems += problems
            out.evidence.append(f"{e.path}: {n} tables re-rendered" + (" identical" if not problems else ""))
    if out.problems:
        out.status = Status.FAILED
    return out


def rerun_cells(
    client: docker.DockerClient, ws: Workspace, planned: list[Rerun], gpus: str | None
) -> Outcome:
    out = Outcome(Check.RERUN)
    runnable = [p for p in planned if p.skip is None]
    out.evidence += [f"{p.name}: not re-run: {p.skip}" for p in planned if p.skip is not None]
    if not runnable:
        return Outcome(
            Check.RERUN, Status.NOT_RUN, out.evidence, ["no chosen cell can be re-run from the bundle"]
        )
    for p in runnable:
        for path in p.forget:
            ws.here(path).unlink(missing_ok=True)
    for family in sorted({p.family for p in runnable}):
        commands = [ws.command(*p.command) for p in runnable if p.family == family]
        try:
            run_in_image(client, ws, image_of(ws.manifest, family), commands, gpus)
        except BundleError as err:
            out.fail(f"{family}: {err}")
    for p in runnable:
        if p.judge is None:
            continue
        problems, line = p.judge(ws)
        out.evidence.append(line)
        if problems:
            out.fail(*problems)
    return out


def verify_bundle(bundle: Path, manifest: Manifest, options: VerifyOptions) -> list[Outcome]:
    """Run the chosen checks; every one gives an outcome, passed or not."""
    outcomes = [check_hashes(bundle, manifest)] if Check.HASHES in options.checks else []
    later = [c for c in options.checks if c is not Check.HASHES]
    if not later:
        return outcomes
    try:
        client = client_from_env(ENGINE_TIMEOUT_S)
    except EngineUnavailable as err:
        return outcomes + [not_run(c, str(err)) for c in later]
    images = check_images(client, bundle, manifest)
    outcomes.append(images)
    rest = [c for c in later if c is not Check.IMAGES]
    if images.status is not Status.PASSED:
        return outcomes + [not_run(c, "the archived images did not load") for c in rest]
    hooks = hooks_of(manifest.benchmark, bundle)
    with tempfile.TemporaryDirectory(prefix="milebench-verify-") as tmp:
        ws = open_workspace(bundle, manifest, Path(tmp), hooks.recomputed)
        planned = (
            hooks.reruns(ws, list(options.rerun), options.rerun_per_model, options.seed)
            if Check.RERUN in rest
            else []
        )
        fetch = hooks.fetch_commands(ws) if any(p.skip is None and p.fetch for p in planned) else []
        if {Check.RESCORE, Check.REPORT} & set(rest):
            try:
                run_in_image(client, ws, image_of(manifest, KIT_FAMILY), fetch + hooks.rescore_commands(ws))
                if Check.RESCORE in rest:
                    outcomes.append(compare_rescore(ws, hooks.rescored))
                if Check.REPORT in rest:
                    outcomes.append(compare_report(ws))
            except BundleError as err:
                outcomes += [
                    Outcome(c, Status.FAILED, problems=[str(err)])
                    for c in (Check.RESCORE, Check.REPORT)
                    if c in rest
                ]
        elif fetch:
            try:
                run_in_image(client, ws, image_of(manifest, KIT_FAMILY), fetch)
            except BundleError as err:
                return [*outcomes, Outcome(Check.RERUN, Status.FAILED, problems=[str(err)])]
        if Check.RERUN in rest:
            outcomes.append(rerun_cells(client, ws, planned, options.gpus))
    return outcomes
