"""The weights lock: hub commits for model specs that leave ``revision: null``, resolved later."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import Field, StringConstraints

from milebench.spec.base import Spec, SpecError, load_spec
from milebench.spec.model import HubWeights, ModelSpec

log = logging.getLogger(__name__)

WEIGHTS_LOCK = Path("locks") / "weights.lock.yaml"
"""Where the weights lock lives, relative to the specs folder."""

Commit = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]


class WeightsLock(Spec):
    """Pins hub weights by commit, so a model spec stays readable while its run stays reproducible."""

    note: str | None = None
    revisions: dict[str, Commit] = Field(
        default_factory=dict, description="Model spec name -> 40-hex commit of its hub repo."
    )


def load_weights_lock(path: Path) -> WeightsLock:
    return load_spec(Path(path), WeightsLock)


def locked_revision(name: str, specs_root: Path) -> str | None:
    """The commit the specs folder's weights lock pins for model ``name``; None without a lock or entry."""
    path = specs_root / WEIGHTS_LOCK
    if not path.exists():
        return None
    return load_weights_lock(path).revisions.get(name)


def check_weights_lock(lock: WeightsLock, models: Mapping[str, ModelSpec], path: Path) -> None:
    """Every locked name must be a model whose weights live on the hub; anything else is a stale entry."""
    problems = [
        (f"revisions.{name}", "no model spec with hub weights has this name")
        for name in lock.revisions
        if name not in models or not isinstance(models[name].weights, HubWeights)
    ]
    if problems:
        raise SpecError(path, problems)


def pin_weights(spec: ModelSpec, specs_root: Path) -> ModelSpec:
    """Fill a hub spec's ``revision: null`` from the weights lock: loading and cache keys use the commit."""
    weights = spec.weights
    if not isinstance(weights, HubWeights) or weights.revision is not None:
        return spec
    commit = locked_revision(spec.name, specs_root)
    if commit is None:
        log.warning(
            "%s: no revision for %s in %s; loading the hub's current main",
            spec.name,
            weights.repo_id,
            specs_root / WEIGHTS_LOCK,
        )
        return spec
    return spec.model_copy(update={"weights": weights.model_copy(update={"revision": commit})})
