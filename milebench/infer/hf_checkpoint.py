"""Where a transformers adapter loads a model from: a hub repo at its pinned revision, or the kit's tiny
checkpoint. Free of transformers imports, so adapters for older transformers stacks (the paper-era
containers) can share it.
"""

from __future__ import annotations

from typing import Any

from milebench.infer.adapter import AdapterError
from milebench.paths import ModelFolders
from milebench.spec.adapters import declared_adapters
from milebench.spec.model import HubWeights, ModelSpec, TinyWeights, UrlWeights

TINY_FAMILY: dict[str, str] = {
    kind: declared.declaration.tiny.family
    for kind, declared in declared_adapters().items()
    if declared.declaration.tiny is not None and declared.declaration.does == "generate"
}
"""Which tiny family an adapter kind may load, as its module declares it; a kind without one loads any."""


def checkpoint(spec: ModelSpec, paths: ModelFolders) -> tuple[str, dict[str, Any]]:
    """Where ``from_pretrained`` reads the model and with which keyword arguments."""
    weights = spec.weights
    if isinstance(weights, TinyWeights):
        family = TINY_FAMILY.get(spec.adapter)
        if family is not None and weights.family != family:
            raise AdapterError(
                f"model spec {spec.name!r}: tiny family {weights.family!r} cannot run on adapter "
                f"{spec.adapter!r} (needs {family!r})"
            )
        folder = paths.model_dir(spec.name)
        if not (folder / "config.json").is_file():
            raise AdapterError(
                f"model spec {spec.name!r}: no checkpoint in {folder}; "
                f"run `milebench tiny-model --model {spec.name}`"
            )
        return str(folder), {}
    if isinstance(weights, UrlWeights) and weights.base is not None:
        weights = weights.base  # the hub model the url files complete; its adapter reads the files
    if isinstance(weights, HubWeights):
        return weights.repo_id, {"revision": weights.revision, "trust_remote_code": weights.trust_remote_code}
    raise AdapterError(
        f"model spec {spec.name!r}: weights kind {weights.kind!r} cannot be loaded by {spec.adapter}"
    )
