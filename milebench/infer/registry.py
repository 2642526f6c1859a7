"""Which adapter class runs which AdapterKind; classes are imported only when used (torch is heavy)."""

from __future__ import annotations

import importlib
from pathlib import Path

from milebench.infer.adapter import Adapter, AdapterError, ChecksWindow
from milebench.paths import RunPaths
from milebench.spec.model import AdapterKind, ApiModel, ModelSpec
from milebench.spec.run import ContextOverflow

ADAPTERS: dict[AdapterKind, str] = {
    AdapterKind.RANDOM: "milebench.infer.random:RandomAdapter",
    AdapterKind.ORACLE: "milebench.infer.oracle:OracleAdapter",
    AdapterKind.HF_LLAVA: "milebench.infer.hf_llava:HfLlavaAdapter",
    AdapterKind.HF_IMAGE_TEXT_TO_TEXT: "milebench.infer.hf_image_text_to_text:HfImageTextToTextAdapter",
    AdapterKind.HF_QWEN2_VL: "milebench.infer.hf_qwen2_vl:HfQwen2VLAdapter",
    AdapterKind.HF_QWEN_VL_CHAT: "milebench.infer.hf_qwen_vl_chat:HfQwenVLChatAdapter",
    AdapterKind.HF_ALLAVA: "milebench.infer.hf_allava:HfAllavaAdapter",
    AdapterKind.HF_LLAVA_NEXT: "milebench.infer.hf_llava_next:HfLlavaNextAdapter",
    AdapterKind.HF_IDEFICS2: "milebench.infer.hf_idefics2:HfIdefics2Adapter",
    AdapterKind.HF_YI_VL: "milebench.infer.hf_yi_vl:HfYiVLAdapter",
    AdapterKind.HF_MANTIS: "milebench.infer.hf_mantis:HfMantisAdapter",
    AdapterKind.OPENAI_CHAT: "milebench.infer.api.openai:OpenAIChatAdapter",
    AdapterKind.ANTHROPIC: "milebench.infer.api.anthropic:AnthropicAdapter",
    AdapterKind.GEMINI: "milebench.infer.api.gemini:GeminiAdapter",
}


def adapter_class(spec: ModelSpec) -> type[Adapter]:
    target = ADAPTERS.get(spec.adapter)
    if target is None:
        why = f": {spec.notes}" if spec.adapter is AdapterKind.UNPORTED and spec.notes else ""
        known = ", ".join(sorted(ADAPTERS))
        raise AdapterError(
            f"model spec {spec.name!r}: adapter {spec.adapter.value!r} is not available in this kit"
            f" (available: {known}){why}"
        )
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)


def adapter_environment(spec: ModelSpec) -> tuple[str, ...]:
    """Names of the environment variables the spec's adapter reads, as the adapter declares them.

    Only API adapters read any; adapters of local weights are not even imported for the answer (torch is
    heavy, and the host that starts a container need not hold the libraries of the model's family)."""
    if not isinstance(spec.weights, ApiModel):
        return ()
    from milebench.infer.api.base import ApiAdapter  # needs requests, which images of local models lack

    cls = adapter_class(spec)
    return cls.environment() if issubclass(cls, ApiAdapter) else ()


def load_adapter(
    spec: ModelSpec, paths: RunPaths, data_root: Path, overflow: ContextOverflow = ContextOverflow.GENERATE
) -> Adapter:
    """The spec's adapter; one that checks the window before generating follows ``overflow`` (the run's
    ``context_overflow``)."""
    adapter = adapter_class(spec)(spec, paths, data_root)
    if isinstance(adapter, ChecksWindow):
        adapter.context_overflow = overflow
    return adapter
