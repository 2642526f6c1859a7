"""``lock-weights``: resolve each hub model's revision to a commit, once, where the hub is reachable."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import yaml

from milebench.errors import KitError
from milebench.hub import hub_error_text, hub_errors
from milebench.io import atomic_write_text
from milebench.spec.model import HubWeights, ModelSpec
from milebench.spec.registry import load_specs
from milebench.spec.weights_lock import WEIGHTS_LOCK, WeightsLock, load_weights_lock

log = logging.getLogger(__name__)


class RevisionError(KitError, RuntimeError):
    """A model's revision could not be resolved on the hub; the message names the model and its repo."""


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
            where = f"{name} ({spec.weights.repo_id} at {ref!r})"
            try:
                sha = api.model_info(spec.weights.repo_id, revision=ref).sha
            except hub_errors() as err:
                raise RevisionError(
                    f"cannot resolve model revisions on the hub: {where}: {hub_error_text(err)}"
                ) from err
            if sha is None:
                raise RevisionError(f"hub returned no commit for {spec.weights.repo_id}@{ref} ({name})")
            log.info("%s: %s@%s -> %s", name, spec.weights.repo_id, ref, sha)
            revisions[name] = sha
    return WeightsLock(
        note=f"Resolved from the hub ref {ref!r} by `milebench lock-weights`.", revisions=revisions
    )


def lock_weights(args: argparse.Namespace) -> int:
    """Pin every open hub model, or with ``--run`` that run's only, keeping the lock's other entries."""
    from huggingface_hub import HfApi

    specs = load_specs(args.specs)
    out = Path(args.specs) / WEIGHTS_LOCK
    models = specs.models if args.run is None else {n: specs.model(n) for n in specs.run(args.run).models}
    lock = resolve_revisions(models, HfApi(), ref=args.ref)
    if args.run is not None and out.exists():
        kept = {n: r for n, r in load_weights_lock(out).revisions.items() if n not in models}
        lock = lock.model_copy(update={"revisions": dict(sorted({**kept, **lock.revisions}.items()))})
    atomic_write_text(out, yaml.safe_dump(lock.model_dump(mode="json"), sort_keys=False))
    log.info("wrote %d revisions to %s", len(lock.revisions), out)
    return 0
