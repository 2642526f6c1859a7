"""``milebench archive`` and ``milebench verify``: parse the options, call the library, set the exit code."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from milebench.archive.bundle import archive_run
from milebench.archive.hooks import Options
from milebench.archive.manifest import (
    BundleError,
    bundle_id,
    check_claims,
)
from milebench.archive.reader import read_manifest
from milebench.archive.summary import summary
from milebench.archive.unpack import bundle_folder
from milebench.archive.verify import Check, Status, VerifyOptions, verify_bundle
from milebench.io import atomic_write_text
from milebench.spec.benchmark import benchmark_of_run
from milebench.stage_inputs import require

log = logging.getLogger(__name__)


def archive(args: argparse.Namespace) -> int:
    options = Options(
        with_data=args.with_data,
        with_weights=args.with_weights,
        images=not args.no_images,
        tarball=args.tarball,
    )
    benchmark = benchmark_of_run(args.specs, args.run)
    identity = archive_run(benchmark, args.specs, args.run, args.root, args.out, options)
    sys.stdout.write(f"{identity}\n")
    return 0


def checks(text: str | None) -> tuple[Check, ...]:
    if text is None:
        return tuple(Check)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in {c.value for c in Check}]
    if unknown or not names:
        raise BundleError(f"--only {text}: checks are {', '.join(c.value for c in Check)}")
    return tuple(Check(n) for n in names)


def verify(args: argparse.Namespace) -> int:
    require(args.bundle, "bundle folder or tarball", "`milebench archive --run RUN --out DIR [--tarball]`")
    with bundle_folder(args.bundle) as bundle:
        return verify_folder(bundle, args)


def verify_folder(bundle: Path, args: argparse.Namespace) -> int:
    manifest = read_manifest(bundle)
    check_claims(bundle, manifest)
    identity = bundle_id(bundle)
    if args.expect_id is not None and args.expect_id != identity:
        raise BundleError(f"{args.bundle}: bundle id {identity}, not the expected {args.expect_id}")
    options = VerifyOptions(
        checks=checks(args.only),
        rerun=tuple(args.rerun),
        rerun_per_model=args.rerun_per_model,
        seed=args.seed,
        gpus=args.gpus,
    )
    outcomes = verify_bundle(bundle, manifest, options)
    for outcome in outcomes:
        for problem in outcome.problems:
            log.error("%s %s: %s", outcome.check, outcome.status, problem)
    text = summary(identity, manifest, outcomes)
    if args.summary is not None:
        atomic_write_text(args.summary, text)
    sys.stdout.write(text)
    return 0 if all(o.status is Status.PASSED for o in outcomes) else 1
