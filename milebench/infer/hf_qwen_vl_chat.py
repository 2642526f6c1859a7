"""Qwen-VL-Chat through the checkpoint's own remote code (``trust_remote_code``), as its model card runs
it: the tokenizer's ``from_list_format`` builds the query and the model's ``chat`` answers one chatml turn.

MileBench prompts interleave text and images: every ``<ImageHere>`` becomes an image entry holding the
picture's absolute path (the model's visual module opens it) and the text pieces stay between them, so
the query reads ``Picture 1: <img>/abs/path</img>\\n...`` in prompt order. ``chat`` takes one sample at
a time. Decoding is greedy with the spec's token limits, whatever the checkpoint's generation_config
samples with; its chat format and window stay the checkpoint's own.

How it runs is the spec's execution, which states the checkpoint's own way (``qwen_chat`` turn, the
visual module's preprocessing, the whole turn tokenized, one sample per call, no autocast, the
checkpoint's own stop words); the weights' dtype reaches the checkpoint's precision switch. Any other
choice is refused at load (:class:`~milebench.infer.execution_check.UnsupportedExecution`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, Unpack, cast

import torch
import transformers
from PIL import Image
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
from transformers.generation.streamers import BaseStreamer

from milebench.infer.adapter import AdapterError, AdapterOptions, SampleFailure, TokenUsage, failure_kind
from milebench.infer.execution_check import require_supported
from milebench.infer.hf_checkpoint import checkpoint
from milebench.infer.image_preprocessing import ImageStep
from milebench.infer.images import reading_image
from milebench.infer.input_view import InputView
from milebench.infer.records import IMAGE_PLACEHOLDER, FailureKind, ModelInput
from milebench.infer.time_limit import cut_by_time_limit, timeout_failure
from milebench.infer.window import refusal
from milebench.paths import ModelFolders
from milebench.spec.execution import (
    Autocast,
    Decoding,
    Dtype,
    ImageBackend,
    ImagePreprocessing,
    Tokenization,
)
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import execution_of
from milebench.spec.policy import ContextOverflow, run_policy

ADAPTER = {"kind": "hf-qwen-vl-chat", "does": "generate", "entry": "HfQwenVLChatAdapter"}
"""What this module runs (milebench.spec.adapters)."""

TEMPLATES = {"qwen_chat": """Qwen-VL-Chat's ``chat``: a chatml turn built by the checkpoint's remote code."""}
"""The turn format this module declares (milebench.spec.templates); the checkpoint's ``chat`` renders it."""

SYSTEM = "You are a helpful assistant."
"""The system turn of ``chat`` (its default), passed explicitly so the token count below matches it."""

CHATML_TURN = (
    "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{query}<|im_end|>\n<|im_start|>assistant\n"
)
"""The text ``chat`` tokenizes (its ``make_context`` for chatml without history)."""

SUPPORTED: dict[str, frozenset[Any]] = {
    "prompt_template": frozenset(TEMPLATES),
    "image_preprocessing": frozenset({ImagePreprocessing.PROCESSOR}),
    "image_backend": frozenset({ImageBackend.DEFAULT}),
    "tokenization": frozenset({Tokenization.WHOLE}),
    "decoding": frozenset({Decoding.PER_SAMPLE}),
    "autocast": frozenset({Autocast.OFF}),
    "stop_strings": frozenset({()}),
    "original_vocab_only": frozenset({False}),
}
"""The checkpoint's code makes every choice but the dtype: these are the ones it makes."""

PRECISION_FLAGS = {Dtype.BFLOAT16: "bf16", Dtype.FLOAT16: "fp16", Dtype.FLOAT32: "fp32"}
"""The config flags with which the checkpoint's QWenLMHeadModel converts itself to a dtype."""

VISUAL_NOTE = (
    "each picture is opened from the path in its <img> span by the checkpoint's visual module, which "
    "resizes it to its own square input (no padding)"
)


def precision_flags(dtype: Dtype, device: torch.device) -> dict[str, bool]:
    """The precision switch to load with: the execution's dtype on a GPU, float32 on the CPU (the kit's
    CPU rule; the checkpoint itself picks float32 there too). Without a flag the checkpoint picks
    bfloat16 wherever the GPU has it."""
    return {PRECISION_FLAGS[dtype if device.type == "cuda" else Dtype.FLOAT32]: True}


class RemoteChat(Protocol):
    """The ``chat`` that the checkpoint's remote code adds to its model; no transformers class has it."""

    def chat(
        self,
        tokenizer: Any,
        query: str,
        *,
        history: None,
        system: str,
        generation_config: GenerationConfig,
        streamer: BaseStreamer,
    ) -> tuple[str, Any]: ...


class TokenCounter(BaseStreamer):
    """What ``generate`` streams: the prompt first, then each new token; exact counts without
    re-tokenizing, since ``chat`` hides its input ids."""

    def __init__(self) -> None:
        self.input_tokens: int | None = None
        self.new_tokens: list[int] = []

    def put(self, value: torch.Tensor) -> None:
        ids = value.flatten().tolist()
        if self.input_tokens is None:
            self.input_tokens = len(ids)
        else:
            self.new_tokens += ids

    def end(self) -> None:
        """Nothing to flush: the counts are read after ``chat`` returns."""


class HfQwenVLChatAdapter:
    """One ``chat`` call per sample, seeded.

    A sample whose chat turn is longer than the spec's ``max_context_len``, or that has more images than
    ``max_images``, is answered, as the official code would have generated it (the engine records by
    how much it went over); under the strict variant (the policy's ``context_overflow`` refuse) a turn
    too long fails as context overflow without a call, and the engine refuses samples over
    ``max_images``. Any other error of a sample (a missing picture, a path too long for the image span)
    fails that sample only.
    Output tokens count every token the model generated, stop tokens included.
    """

    version = f"1+transformers-{transformers.__version__}+torch-{torch.__version__}"

    def __init__(
        self, spec: ModelSpec, paths: ModelFolders, data_root: Path, **options: Unpack[AdapterOptions]
    ) -> None:
        with_model = options.get("with_model", True)
        self.spec = spec
        self.policy = options.get("policy") or run_policy(None, spec)
        self.data_root = data_root
        execution = execution_of(spec)
        if execution is None:
            raise AdapterError(
                f"model spec {spec.name!r}: hf-qwen-vl-chat runs the checkpoint's own chat; "
                "the spec must state its execution"
            )
        require_supported(spec, execution, SUPPORTED)
        self.execution = execution
        source, kwargs = checkpoint(spec, paths)
        if not kwargs.get("trust_remote_code"):
            raise AdapterError(
                f"model spec {spec.name!r}: hf-qwen-vl-chat runs the checkpoint's own code; "
                "set weights.trust_remote_code: true"
            )
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        precision = precision_flags(execution.dtype, self.device)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            if with_model:
                self.model = AutoModelForCausalLM.from_pretrained(source, **kwargs, **precision)
        except (OSError, ValueError, ImportError) as err:
            raise AdapterError(f"model spec {spec.name!r}: cannot load {source} {kwargs}: {err}") from err
        if with_model:
            # transformers wraps PreTrainedModel.to with functools.wraps, which types it as unbound
            self.model.to(self.device).eval()  # type: ignore[arg-type]
            self.generation_config = self.greedy_config()
        self.frame_tokens = len(self.tokenizer.tokenize(CHATML_TURN.format(system=SYSTEM, query="")))
        self._usage: list[TokenUsage] = []

    def greedy_config(self) -> GenerationConfig:
        """The checkpoint's generation config (chat format, window, stop ids) with the spec's decoding."""
        generation = self.spec.generation
        if self.model.generation_config is None:
            raise AdapterError(f"model spec {self.spec.name!r}: the checkpoint has no generation config")
        config = copy.deepcopy(self.model.generation_config)
        config.update(
            do_sample=generation.do_sample,
            top_p=None,
            top_k=None,
            temperature=None,
            max_new_tokens=generation.max_new_tokens,
            min_new_tokens=generation.min_new_tokens,
            max_time=self.spec.sample_timeout_s,
        )
        return config

    def query(self, sample: ModelInput) -> str:
        """The interleaved query: image entries in placeholder order, text pieces between them."""
        pieces = sample.prompt.split(IMAGE_PLACEHOLDER)
        if len(pieces) - 1 != len(sample.images):
            raise AdapterError(
                f"task {sample.task}, sample {sample.sample_id}: {len(pieces) - 1} image placeholders "
                f"for {len(sample.images)} images"
            )
        entries: list[dict[str, str]] = []
        for i, piece in enumerate(pieces):
            if i:
                entries.append({"image": str((self.data_root / sample.images[i - 1]).resolve())})
            if piece:
                entries.append({"text": piece})
        return self.tokenizer.from_list_format(entries)

    def input_tokens(self, query: str) -> int:
        """Tokens of the whole chat turn: the frame plus the query, each image as its full span."""
        return self.frame_tokens + len(self.tokenizer.tokenize(query))

    def input_view(self, sample: ModelInput) -> InputView:
        """The chat turn ``chat`` tokenizes for ``sample``, and each picture as its path names it."""
        query = self.query(sample)
        steps = []
        for rel in sample.images:
            with reading_image(sample, rel), Image.open(self.data_root / rel) as picture:
                steps.append(ImageStep(picture.size, None, picture.size))
        return InputView(
            text=CHATML_TURN.format(system=SYSTEM, query=query),
            tokens=self.input_tokens(query),
            ids_per_image=None,
            steps=tuple(steps),
            pixels=None,
            notes=(VISUAL_NOTE,),
        )

    @torch.inference_mode()
    def generate(self, samples: Sequence[ModelInput]) -> list[str | SampleFailure]:
        results: list[str | SampleFailure] = []
        self._usage = []
        for sample in samples:
            start = time.perf_counter()
            answer, input_tokens, output_tokens = self.answer(sample)
            results.append(answer)
            self._usage.append(TokenUsage(input_tokens, output_tokens, time.perf_counter() - start))
        return results

    def answer(self, sample: ModelInput) -> tuple[str | SampleFailure, int | None, int | None]:
        """The sample's answer or failure, with its input and output token counts where known."""
        try:
            query = self.query(sample)
            n_input = self.input_tokens(query)
            strict = self.policy.context_overflow is ContextOverflow.REFUSE
            refused = refusal(self.spec, n_input) if strict else None
            if refused is not None:
                return SampleFailure(FailureKind.CONTEXT_OVERFLOW, refused), n_input, None
            torch.manual_seed(self.spec.generation.seed)
            counter = TokenCounter()
            response, _ = cast(RemoteChat, self.model).chat(
                self.tokenizer,
                query,
                history=None,
                system=SYSTEM,
                generation_config=self.generation_config,
                streamer=counter,
            )
        except Exception as err:
            kind = failure_kind(err)
            if kind is FailureKind.OOM:
                torch.cuda.empty_cache()
            detail = f"task {sample.task}, sample {sample.sample_id}: {type(err).__name__}: {err}"
            return SampleFailure(kind, detail), None, None
        n_output = len(counter.new_tokens)
        timeout = self.spec.sample_timeout_s
        config = self.generation_config
        if timeout and cut_by_time_limit(counter.new_tokens, config.max_new_tokens, config.eos_token_id):
            return timeout_failure(timeout, 1, n_output), counter.input_tokens, n_output
        return response.strip(), counter.input_tokens, n_output

    def last_usage(self) -> list[TokenUsage]:
        return list(self._usage)
