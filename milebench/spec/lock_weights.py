"""``lock-weights``: resolve each hub model's revision to a commit, once, where the hub is reachable."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import yaml

from milebench.hub import hub_errors
from milebench.io import atomic_write_text
from milebench.spec.model import HubWeights, ModelSpec
from milebench.spec.registry import load_specs
from milebench.spec.weights_lock import WEIGHTS_LOCK, WeightsLock

log = logging.getLogger(__name__)


class ModelInfo(Protocol):
    sha: str | None


class HubApi(Protocol):
    """The one call of ``huggingface_hub.HfApi`` this needs; tests pass a stand-in."""

    def model_info(self, repo_id: str, *, revision: str | None = None) -> ModelInfo: ...


def resolve_revisions(models: Mapping[str, ModelSpec], api: HubApi, ref: str = "main") -> WeightsLock:
    """Commit of ``ref`` for every hub model that leaves its revision open in its spec."""
    revisions: dict[str, str] = {}
    for name, spec in sorted(models.items()):
        if isinstance(spec.weights, HubWeights) and spec.weights.revision is None:
            sha = api.model_info(spec.weights.repo_id, revision=ref).sha
            if sha is None:
                raise RuntimeError(f"hub returned no commit for {spec.weights.repo_id}@{ref} ({name})")
            log.info("%s: %s@%s -> %s", name, spec.weights.repo_id, ref, sha)
            revisions[name] = sha
    return WeightsLock(
        note=f"Resolved from the hub ref {ref!r} by `milebench lock-weights`.", revisions=revisions
    )


def lock_weights(args: argparse.Namespace) -> int:
    from huggingface_hub import HfApi

    specs = load_specs(args.specs)
    try:
        lock = resolve_revisions(specs.models, HfApi(), ref=args.ref)
    except hub_errors() as err:
        log.error("cannot resolve model revisions on the hub: %s", err)
        return 1
    out = Path(args.specs) / WEIGHTS_LOCK
    atomic_write_text(out, yaml.safe_dump(lock.model_dump(mode="json"), sort_keys=False))
    log.info("wrote %d revisions to %s", len(lock.revisions), out)
    return 0
