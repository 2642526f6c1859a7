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
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import docker

from milebench.benchmarks.milebench.archive.badges import Role
from milebench.benchmarks.milebench.archive.compare import (
    compare_json,
    compare_rows,
    compare_tables,
    read_json,
)
from milebench.benchmarks.milebench.archive.images import ENGINE_TIMEOUT_S, archive_problems, load_image
from milebench.benchmarks.milebench.archive.manifest import BundleError, Manifest, check_files, inside
from milebench.benchmarks.milebench.archive.rerun import Planned, choose, forget, judge, plan
from milebench.benchmarks.milebench.archive.rerun import archived_cells as cells_of
from milebench.benchmarks.milebench.archive.workspace import Workspace, image_of, open_workspace, run_in_image
from milebench.benchmarks.milebench.spec.registry import load_specs
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


def rescore_commands(ws: Workspace, fetch: bool) -> list[list[str]]:
    """Re-render the report from the archived scores, re-score every archived cell, re-aggregate with the
    archived settings (and first fetch the bundled data when a re-run cell reads images)."""
    path = ws.path_of(Role.AGGREGATE)
    settings = read_json(ws.archived(path))
    resamples, seed = (settings.get(k) if isinstance(settings, dict) else None for k in ("resamples", "seed"))
    if not (isinstance(resamples, int) and isinstance(seed, int)):
        raise BundleError(f"{path}: no integer resamples and seed: not an aggregate the kit writes")
    commands = [ws.command("fetch")] if fetch else []
    commands.append(ws.command("report", root=ws.render_root))
    commands += [
        ws.command("score", "--model", c.model, "--task", c.task, "--mode", str(c.mode))
        for c in cells_of(ws.manifest)
    ]
    commands.append(ws.command("aggregate", "--resamples", str(resamples), "--seed", str(seed)))
    return commands


def compare_rescore(ws: Workspace) -> Outcome:
    out = Outcome(Check.RESCORE)
    counts = {Role.JUDGMENT: 0, Role.TASK_SCORE: 0, Role.AGGREGATE: 0, Role.VERDICT: 0}
    for e in ws.manifest.files:
        if e.role not in counts:
            continue
        counts[e.role] += 1
        old, new = ws.archived(e.path), ws.here(e.path)
        if e.role is Role.JUDGMENT:
            out.problems += compare_rows(e.path, old, new, ("scorer", "sample_id"))
        else:
            out.problems += compare_json(e.path, old, new)
    if out.problems:
        out.status = Status.FAILED
    out.evidence.append(
        f"re-scored in the archived kit image: {counts[Role.JUDGMENT]} judgment files, "
        f"{counts[Role.TASK_SCORE]} task scores, the aggregate and {counts[Role.VERDICT]} verdict file "
        + ("equal the archived ones" if not out.problems else "compared")
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
    client: docker.DockerClient, ws: Workspace, planned: list[Planned], gpus: str | None
) -> Outcome:
    out = Outcome(Check.RERUN)
    runnable = [p for p in planned if p.skip is None]
    out.evidence += [f"{p.name}: not re-run: {p.skip}" for p in planned if p.skip is not None]
    if not runnable:
        return Outcome(
            Check.RERUN, Status.NOT_RUN, out.evidence, ["no chosen cell can be re-run from the bundle"]
        )
    for p in runnable:
        forget(ws, p.cell)
    for family in sorted({str(p.model.container) for p in runnable}):
        own = [p for p in runnable if p.model.container == family]
        commands = [
            ws.command("infer", "--model", p.cell.model, "--task", p.cell.task, "--mode", str(p.cell.mode))
            for p in own
        ]
        try:
            run_in_image(client, ws, image_of(ws.manifest, family), commands, gpus)
        except BundleError as err:
            out.fail(f"{family}: {err}")
    for p in runnable:
        problems, line = judge(ws, p)
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
    with tempfile.TemporaryDirectory(prefix="milebench-verify-") as tmp:
        ws = open_workspace(bundle, manifest, Path(tmp))
        specs = load_specs(ws.specs)
        planned = (
            plan(ws, specs, choose(manifest, list(options.rerun), options.rerun_per_model, options.seed))
            if Check.RERUN in rest
            else []
        )
        fetch = any(p.skip is None and not p.model.builtin for p in planned)
        if {Check.RESCORE, Check.REPORT} & set(rest):
            try:
                run_in_image(client, ws, image_of(manifest, KIT_FAMILY), rescore_commands(ws, fetch))
                outcomes += [
                    check(ws)
                    for c, check in ((Check.RESCORE, compare_rescore), (Check.REPORT, compare_report))
                    if c in rest
                ]
            except BundleError as err:
                outcomes += [
                    Outcome(c, Status.FAILED, problems=[str(err)])
                    for c in (Check.RESCORE, Check.REPORT)
                    if c in rest
                ]
        elif fetch:
            try:
                run_in_image(client, ws, image_of(manifest, KIT_FAMILY), [ws.command("fetch")])
            except BundleError as err:
                return [*outcomes, Outcome(Check.RERUN, Status.FAILED, problems=[str(err)])]
        if Check.RERUN in rest:
            outcomes.append(rerun_cells(client, ws, planned, options.gpus))
    return outcomes
