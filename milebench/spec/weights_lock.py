"""The weights lock: hub commits for model specs that leave ``revision: null``, and the sizes and sha256s
of weight files distributed outside the hub whose specs leave them ``null``, resolved later."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import Field, StrictInt, StringConstraints

from milebench.spec.base import Spec, SpecError, load_spec
from milebench.spec.model import HubWeights, ModelSpec, UrlWeights, WeightFile

log = logging.getLogger(__name__)

WEIGHTS_LOCK = Path("locks") / "weights.lock.yaml"
"""Where the weights lock lives, relative to the specs folder."""

Commit = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
UNRESOLVED_FILE = "no size and sha256 for it in the spec or the weights lock"


class FileDigest(Spec):
    """What a downloaded weight file must be, byte for byte."""

    size: StrictInt = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class WeightsLock(Spec):
    """Pins hub weights by commit and weight files by size and sha256, so a model spec stays readable
    while its run stays reproducible."""

    note: str | None = None
    revisions: dict[str, Commit] = Field(
        default_factory=dict,
        description="Model spec name -> 40-hex commit of its hub repo (url weights: of their base).",
    )
    files: dict[str, dict[str, FileDigest]] = Field(
        default_factory=dict,
        description="Model spec name -> file name -> size and sha256, for url weights whose spec leaves "
        "them null.",
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
        if name not in models or hub_part(models[name]) is None
    ]
    for name, files in lock.files.items():
        weights = models[name].weights if name in models else None
        if not isinstance(weights, UrlWeights):
            problems.append((f"files.{name}", "no model spec with url weights has this name"))
            continue
        known = {f.name for f in weights.files}
        problems += [
            (f"files.{name}.{file}", f"model spec {name!r} has no weight file of this name")
            for file in files
            if file not in known
        ]
    if problems:
        raise SpecError(path, problems)


def hub_part(spec: ModelSpec) -> HubWeights | None:
    """The hub weights of ``spec``: its own, or the base model its url weights complete."""
    weights = spec.weights
    if isinstance(weights, HubWeights):
        return weights
    return weights.base if isinstance(weights, UrlWeights) else None


def locked_file(name: str, file: WeightFile, specs_root: Path) -> WeightFile:
    """``file`` with a null size or sha256 taken from the weights lock, where it has them."""
    if file.size is not None and file.sha256 is not None:
        return file
    path = specs_root / WEIGHTS_LOCK
    digest = load_weights_lock(path).files.get(name, {}).get(file.name) if path.exists() else None
    if digest is None:
        return file
    return file.model_copy(update={"size": file.size or digest.size, "sha256": file.sha256 or digest.sha256})


def pin_weights(spec: ModelSpec, specs_root: Path) -> ModelSpec:
    """Fill a spec's ``revision: null`` (url weights: their base's, and each file's null size and
    sha256) from the weights lock: loading and cache keys use what it pins."""
    if isinstance(spec.weights, UrlWeights):
        files = tuple(locked_file(spec.name, f, specs_root) for f in spec.weights.files)
        base = spec.weights.base
        if base is not None and base.revision is None:
            commit = locked_revision(spec.name, specs_root)
            base = base if commit is None else base.model_copy(update={"revision": commit})
        update = {"files": files, "base": base}
        return spec.model_copy(update={"weights": spec.weights.model_copy(update=update)})
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
