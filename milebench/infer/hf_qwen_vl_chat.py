"""Qwen-VL-Chat through the checkpoint's own remote code (``trust_remote_code``), as its model card runs
it: the tokenizer's ``from_list_format`` builds the query and the model's ``chat`` answers one chatml turn.

MileBench prompts interleave text and images: every ``<ImageHere>`` becomes an image entry holding the
picture's absolute path (the model's visual module opens it) and the text pieces stay between them, so
the query reads ``Picture 1: <img>/abs/path</img>\\n...`` in prompt order. ``chat`` takes one sample at
a time. Decoding is greedy with the spec's token limits, whatever the checkpoint's generation_config
samples with; its chat format and window stay the checkpoint's own.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
from transformers.generation.streamers import BaseStreamer

from milebench.infer.adapter import AdapterError, SampleFailure, TokenUsage, failure_kind
from milebench.infer.hf_checkpoint import checkpoint
from milebench.infer.time_limit import cut_by_time_limit, timeout_failure
from milebench.infer.window import refusal
from milebench.paths import RunPaths
from milebench.records import IMAGE_PLACEHOLDER, FailureKind, PreparedSample
from milebench.spec.model import ModelSpec
from milebench.spec.run import ContextOverflow

SYSTEM = "You are a helpful assistant."
"""The system turn of ``chat`` (its default), passed explicitly so the token count below matches it."""

CHATML_FRAME = "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n"
"""A chatml turn without the query: what ``chat`` adds around it."""


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
    how much it went over); under the strict variant (``context_overflow`` refuse) a turn too long fails
    as context overflow without a call, and the engine refuses samples over ``max_images``. Any other
    error of a sample (a missing picture, a path too long for the image span) fails that sample only.
    Output tokens count every token the model generated, stop tokens included.
    """

    version = f"1+transformers-{transformers.__version__}+torch-{torch.__version__}"
    context_overflow: ContextOverflow = ContextOverflow.GENERATE
    """The run's ``context_overflow``, set by the loader."""

    def __init__(self, spec: ModelSpec, paths: RunPaths, data_root: Path) -> None:
        self.spec = spec
        self.data_root = data_root
        source, kwargs = checkpoint(spec, paths)
        if not kwargs.get("trust_remote_code"):
            raise AdapterError(
                f"model spec {spec.name!r}: hf-qwen-vl-chat runs the checkpoint's own code; "
                "set weights.trust_remote_code: true"
            )
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            self.model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
        except (OSError, ValueError, ImportError) as err:
            raise AdapterError(f"model spec {spec.name!r}: cannot load {source} {kwargs}: {err}") from err
        # transformers wraps PreTrainedModel.to with functools.wraps, which types it as unbound
        self.model.to(self.device).eval()  # type: ignore[arg-type]
        self.generation_config = self.greedy_config()
        self.frame_tokens = len(self.tokenizer.tokenize(CHATML_FRAME.format(system=SYSTEM)))
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

    def query(self, sample: PreparedSample) -> str:
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

    @torch.inference_mode()
    def generate(self, samples: Sequence[PreparedSample]) -> list[str | SampleFailure]:
        results: list[str | SampleFailure] = []
        self._usage = []
        for sample in samples:
            start = time.perf_counter()
            answer, input_tokens, output_tokens = self.answer(sample)
            results.append(answer)
            self._usage.append(TokenUsage(input_tokens, output_tokens, time.perf_counter() - start))
        return results

    def answer(self, sample: PreparedSample) -> tuple[str | SampleFailure, int | None, int | None]:
        """The sample's answer or failure, with its input and output token counts where known."""
        try:
            query = self.query(sample)
            n_input = self.input_tokens(query)
            strict = self.context_overflow is ContextOverflow.REFUSE
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
