"""CLI handlers of ``milebench fetch`` and ``milebench fetch-weights``."""

from __future__ import annotations

import argparse
import logging

from milebench.benchmarks.milebench.data.fetch import fetch_run
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.data.download import RetryPolicy
from milebench.data.errors import FetchError
from milebench.spec.weights_lock import pin_weights

log = logging.getLogger(__name__)


def fetch(args: argparse.Namespace) -> int:
    specs = load_specs(args.specs)
    run = specs.run(args.run)
    try:
        fetch_run(
            specs,
            run,
            RunPaths.for_run(run, base=args.root),
            retry=RetryPolicy(deadline_s=args.download_deadline),
        )
    except FetchError as err:
        log.error("%s", err)
        return 1
    return 0


def fetch_weights(args: argparse.Namespace) -> int:
    from milebench.data.weight_files import fetch_weight_files

    specs = load_specs(args.specs)
    try:
        spec = pin_weights(specs.model(args.model), specs.lock_root())
        for name, path in fetch_weight_files(spec).items():
            log.info("%s: %s verified at %s", spec.name, name, path)
    except FetchError as err:
        log.error("%s", err)
        return 1
    return 0
