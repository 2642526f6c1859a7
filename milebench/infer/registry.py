"""Which adapter class runs which kind (registered by entry point, declared in its module), and which
function renders which prompt template; both are imported only when used (torch is heavy)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from milebench.infer.adapter import Adapter, AdapterError
from milebench.paths import ModelFolders
from milebench.spec.adapters import UNPORTED, declared, declared_adapters
from milebench.spec.execution import Backend
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import execution_of
from milebench.spec.policy import RunPolicy
from milebench.spec.templates import declared_templates

ADAPTERS: dict[str, str] = {
    kind: declared.target
    for kind, declared in declared_adapters().items()
    if declared.declaration.does == "generate"
}
"""``module:Class`` of each generating kind, as it is registered."""


VLLM_ADAPTER = "milebench.infer.vllm_backend:VllmAdapter"
"""The adapter of an execution with ``backend: vllm`` (a variant), whatever the spec's adapter kind."""
VLLM_MEMORY_FRACTION = "MILEBENCH_VLLM_MEMORY_FRACTION"
"""The share of the device's memory (on the CPU: of the host's) vLLM may take; unset, vLLM's default."""
VLLM_ENVIRONMENT = (VLLM_MEMORY_FRACTION, "VLLM_CPU_KVCACHE_SPACE")
"""What the vLLM adapter reads besides its kind's: a shared CPU box needs a small memory fraction and
KV cache (GiB), passed into its container like an adapter's declared variables."""


def adapter_class(spec: ModelSpec) -> type[Adapter]:
    """The class that runs ``spec``: vLLM's under a ``backend: vllm`` execution, else its kind's."""
    execution = execution_of(spec)
    if execution is not None and execution.backend is Backend.VLLM:
        module_name, class_name = VLLM_ADAPTER.split(":")
        return getattr(importlib.import_module(module_name), class_name)
    return kind_class(spec)


def kind_class(spec: ModelSpec) -> type[Adapter]:
    """The class the spec's adapter kind declares."""
    target = ADAPTERS.get(spec.adapter)
    if target is None:
        why = f": {spec.notes}" if spec.adapter == UNPORTED and spec.notes else ""
        known = ", ".join(sorted(ADAPTERS))
        raise AdapterError(
            f"model spec {spec.name!r}: adapter {spec.adapter!r} is not available in this kit"
            f" (available: {known}){why}"
        )
    module_name, class_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        fix = (
            f"run it in its image (`milebench image build --family {spec.container}`)"
            if spec.container
            else "install torch and the kit (`pip install torch==2.13.0 && pip install -e .`)"
        )
        raise AdapterError(
            f"model spec {spec.name!r}: adapter {spec.adapter!r} cannot be imported "
            f"({module_name.replace('.', '/')}.py: {err}); {fix}"
        ) from None
    return getattr(module, class_name)


def adapter_environment(spec: ModelSpec) -> tuple[str, ...]:
    """Names of the environment variables the spec's adapter reads, as its module declares them; read
    without importing it (torch is heavy, and the host that starts a container need not hold the libraries
    of the model's family)."""
    found = declared(spec.adapter)
    own = found.environment if found is not None else ()
    execution = execution_of(spec)
    return own + VLLM_ENVIRONMENT if execution is not None and execution.backend is Backend.VLLM else own


def load_adapter(
    spec: ModelSpec, paths: ModelFolders, data_root: Path, policy: RunPolicy | None = None
) -> Adapter:
    """The spec's adapter, built with the job's ``policy`` (None: a run spec's defaults)."""
    return adapter_class(spec)(spec, paths, data_root, policy=policy)


def template_renderer(name: str) -> Callable[[str], str]:
    """The function that renders template ``name`` (a name the spec's validation found declared): the one
    of that name in the module that declares it."""
    found = declared_templates()[name]
    renderer: Callable[[str], str] | None = getattr(importlib.import_module(found.module), name, None)
    if renderer is None:
        raise AdapterError(
            f"prompt template {name!r}: {found.module} declares it but has no function {name} to render it"
        )
    return renderer
