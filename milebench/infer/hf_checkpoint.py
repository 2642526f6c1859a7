"""Where a transformers adapter loads a model from: a hub repo at its pinned revision, or the kit's tiny
checkpoint. Free of transformers imports, so adapters for older transformers stacks (the paper-era
containers) can share it.
"""

from __future__ import annotations

from typing import Any

from milebench.infer.adapter import AdapterError
from milebench.paths import RunPaths
from milebench.spec.model import AdapterKind, HubWeights, ModelSpec, TinyWeights

TINY_FAMILY: dict[AdapterKind, str] = {
    AdapterKind.HF_LLAVA: "llava",
    AdapterKind.HF_QWEN2_VL: "qwen2-vl",
    AdapterKind.HF_LLAVA_NEXT: "llava-next",
    AdapterKind.HF_IDEFICS2: "idefics2",
    AdapterKind.HF_YI_VL: "yi-vl",
    AdapterKind.HF_MANTIS: "mantis",
}
"""Which tiny family an adapter kind may load; the generic kind loads any."""


def checkpoint(spec: ModelSpec, paths: RunPaths) -> tuple[str, dict[str, Any]]:
    """Where ``from_pretrained`` reads the model and with which keyword arguments."""
    weights = spec.weights
    if isinstance(weights, TinyWeights):
        family = TINY_FAMILY.get(spec.adapter)
        if family is not None and weights.family != family:
            raise AdapterError(
                f"model spec {spec.name!r}: tiny family {weights.family!r} cannot run on adapter "
                f"{spec.adapter.value!r} (needs {family!r})"
            )
        folder = paths.model_dir(spec.name)
        if not (folder / "config.json").is_file():
            raise AdapterError(
                f"model spec {spec.name!r}: no checkpoint in {folder}; "
                f"run `milebench tiny-model --model {spec.name}`"
            )
        return str(folder), {}
    if isinstance(weights, HubWeights):
        return weights.repo_id, {"revision": weights.revision, "trust_remote_code": weights.trust_remote_code}
    raise AdapterError(
        f"model spec {spec.name!r}: weights kind {weights.kind!r} cannot be loaded by {spec.adapter.value}"
    )
