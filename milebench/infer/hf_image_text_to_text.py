"""Image-text-to-text models through ``transformers``: AutoProcessor, the processor's chat template and
AutoModelForImageTextToText, the same path for hub checkpoints and the kit's tiny ones.

The prompt becomes one user turn whose content parts are the text pieces and one image part per
placeholder, in prompt order, so interleaving is whatever the model's own template makes of it.
Families with prompt specifics subclass this adapter (``hf_llava``).

How the model runs is the spec's execution (``milebench.spec.execution``): image preprocessing and
backend, weights dtype and autocast on a GPU, one ``generate`` per batch or per sample, stop strings.
Each adapter class names the choices it can carry out; any other stops the job at load.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import transformers
from packaging.version import Version
from PIL import Image
from transformers import AutoImageProcessor, AutoProcessor, BatchFeature, PreTrainedModel

from milebench.infer.adapter import AdapterError, SampleFailure, TokenUsage
from milebench.infer.execution_check import require_supported
from milebench.infer.hf_checkpoint import checkpoint
from milebench.infer.image_preprocessing import ImageStep, preprocess
from milebench.infer.images import reading_image
from milebench.infer.input_view import InputView
from milebench.infer.records import IMAGE_PLACEHOLDER, FailureKind, ModelInput
from milebench.infer.stopping import KeywordStop, RowStop
from milebench.infer.time_limit import cut_by_time_limit, timeout_failure
from milebench.infer.window import refusal
from milebench.paths import ModelFolders
from milebench.spec.execution import CHAT_TEMPLATE, Autocast, Decoding, ImageBackend, Tokenization
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import execution_of
from milebench.spec.policy import ContextOverflow, RunPolicy, run_policy

ADAPTER = {
    "kind": "hf-image-text-to-text",
    "does": "generate",
    "entry": "HfImageTextToTextAdapter",
    "execution": "generic",
}
"""What this module runs (milebench.spec.adapters)."""

if TYPE_CHECKING:
    from transformers import GenerationMixin

    class GenerativeModel(PreTrainedModel, GenerationMixin):
        """What every class this adapter loads is: a pretrained model that generates."""


def split_segments(prompt: str) -> list[dict[str, str]]:
    """Chat-template content: text pieces and image slots in prompt order."""
    segments: list[dict[str, str]] = []
    for i, piece in enumerate(prompt.split(IMAGE_PLACEHOLDER)):
        if i:
            segments.append({"type": "image"})
        if piece:
            segments.append({"type": "text", "text": piece})
    return segments


DTYPE_ARGUMENT = "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"
"""``from_pretrained`` took ``torch_dtype`` before transformers 4.56."""


PIL_IMAGE_PROCESSOR: dict[str, Any] = (
    {"backend": "pil"}
    if Version(transformers.__version__) >= Version("5")
    else {"use_fast": False}
    if Version(transformers.__version__) >= Version("4.45")
    else {}
)
"""``AutoImageProcessor`` arguments that pick the PIL implementation: ``backend`` from transformers 5,
``use_fast=False`` before (where fast processors exist); transformers 4.37 has only the PIL one."""


class HfImageTextToTextAdapter:
    """Greedy generation, batched with left padding or one sample at a time; seeded so any sampling
    path is reproducible too.

    A sample whose encoded input (template and image tokens in) is longer than the spec's
    ``max_context_len`` is generated, as the official code did (the engine records by how much it went
    over); under the strict variant (``context_overflow`` refuse) it fails as context overflow without
    being generated, and the rest of the batch is answered. The run's settings (``context_overflow``, the
    stop strings) come from the ``policy`` it is built with. ``with_model=False`` loads only what builds
    inputs (``render-input``).
    """

    version = f"1+transformers-{transformers.__version__}+torch-{torch.__version__}"
    model_class: ClassVar[str] = "AutoModelForImageTextToText"
    """The transformers class that loads the model, looked up at load time: the module then imports
    under the older transformers of the paper-era containers, and only a class they lack is an error."""
    supported: ClassVar[dict[str, frozenset[Any]]] = {
        "prompt_template": frozenset({CHAT_TEMPLATE}),
        "tokenization": frozenset({Tokenization.WHOLE}),
        "decoding": frozenset({Decoding.BATCHED}),
    }
    """The execution choices this class carries out, per field; fields not named take any value."""
    pixel_key: ClassVar[str] = "pixel_values"
    """The name under which the encoded inputs hold the pixels (the model's ``generate`` argument)."""

    def __init__(
        self,
        spec: ModelSpec,
        paths: ModelFolders,
        data_root: Path,
        *,
        with_model: bool = True,
        policy: RunPolicy | None = None,
    ) -> None:
        self.spec = spec
        self.data_root = data_root
        execution = execution_of(spec)
        if execution is None:
            raise AdapterError(f"model spec {spec.name!r}: adapter {spec.adapter} has no execution")
        self.execution = execution
        self.policy = policy or run_policy(None, spec)
        self.check_execution()
        source, kwargs = checkpoint(spec, paths)
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.processor = self.load_processor(source, kwargs)
            if with_model:
                self.model = self.load_model(source, kwargs)
        except (OSError, ValueError, ImportError) as err:
            raise AdapterError(f"model spec {spec.name!r}: cannot load {source} {kwargs}: {err}") from err
        self.processor.tokenizer.padding_side = "left"
        if self.processor.tokenizer.pad_token is None:
            self.processor.tokenizer.pad_token = self.processor.tokenizer.eos_token
        if with_model:
            # transformers wraps PreTrainedModel.to with functools.wraps, which types it as unbound
            self.model.to(self.device).eval()  # type: ignore[arg-type]
        torch.manual_seed(spec.generation.seed)
        self._usage: list[TokenUsage] = []

    def check_execution(self) -> None:
        """Stop before loading when the spec asks for a choice this class cannot carry out."""
        require_supported(self.spec, self.execution, self.supported)

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The model in the execution's dtype on a GPU, float32 on the CPU."""
        model_class = getattr(transformers, self.model_class, None)
        if model_class is None:
            raise AdapterError(
                f"model spec {self.spec.name!r}: transformers {transformers.__version__} has no "
                f"{self.model_class}; run it in a container with a newer transformers"
            )
        dtype = getattr(torch, self.execution.dtype.value) if self.device.type == "cuda" else torch.float32
        return model_class.from_pretrained(source, **{DTYPE_ARGUMENT: dtype}, **kwargs)

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> Any:
        """What turns a prompt and its images into model inputs: the checkpoint's own processor, its
        image half loaded again as the PIL implementation when the execution asks for it (passing the
        choice to AutoProcessor would reach the tokenizer too)."""
        processor = AutoProcessor.from_pretrained(source, **kwargs)
        if self.execution.image_backend is ImageBackend.PIL:
            processor.image_processor = AutoImageProcessor.from_pretrained(
                source, **kwargs, **PIL_IMAGE_PROCESSOR
            )
        return processor

    def image_processor_kwargs(self) -> dict[str, Any]:
        """What this adapter calls the image processor with beyond the pictures: another engine running
        the same checkpoint (vLLM) must size the pictures the same way. The checkpoint's defaults: none."""
        return {}

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """``torch.autocast`` to the execution's dtype on a GPU; nothing on the CPU."""
        if self.execution.autocast is Autocast.OFF or self.device.type != "cuda":
            return contextlib.nullcontext()
        return torch.autocast(device_type="cuda", dtype=getattr(torch, self.execution.autocast.value))

    def render(self, sample: ModelInput) -> str:
        """The model's text input: one user turn through the processor's chat template."""
        conversation = [{"role": "user", "content": split_segments(sample.prompt)}]
        return self.processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)

    def load_images(self, sample: ModelInput) -> list[Image.Image]:
        images = []
        for rel in sample.images:
            with reading_image(sample, rel), Image.open(self.data_root / rel) as img:
                images.append(img.convert("RGB"))
        return images

    def input_images(self, sample: ModelInput) -> tuple[list[Image.Image], list[ImageStep]]:
        """The sample's pictures as the image processor receives them, and what was done to each."""
        how = self.execution.image_preprocessing
        return preprocess(self.load_images(sample), how, self.processor.image_processor)

    def encode(self, samples: Sequence[ModelInput]) -> BatchFeature:
        """Token ids (image tokens expanded), attention mask and pixel inputs of a batch."""
        texts = [self.render(s) for s in samples]
        images = [img for s in samples for img in self.input_images(s)[0]]
        return self.processor(text=texts, images=images or None, return_tensors="pt", padding=True)

    def input_lengths(self, inputs: BatchFeature) -> list[int]:
        """Each row's input length as measured against the window: its tokens without padding."""
        return [int(n) for n in inputs["attention_mask"].sum(dim=1).tolist()]

    def input_view(self, sample: ModelInput) -> InputView:
        """``sample`` as the model gets it: text, length, pictures and pixel shape (``render-input``)."""
        inputs = self.encode([sample])
        pixels = inputs.get(self.pixel_key)
        return InputView(
            text=self.render(sample),
            tokens=self.input_lengths(inputs)[0],
            ids_per_image=getattr(self, "image_seq", None),
            steps=tuple(self.input_images(sample)[1]),
            pixels=None if pixels is None else tuple(pixels.shape),
        )

    def overflowing(self, samples: Sequence[ModelInput], inputs: BatchFeature) -> dict[int, str]:
        """Index -> reason for the samples the strict variant refuses (longer than the model's context);
        none under ``generate``."""
        if self.policy.context_overflow is not ContextOverflow.REFUSE:
            return {}
        reasons = {i: refusal(self.spec, n) for i, n in enumerate(self.input_lengths(inputs))}
        return {i: reason for i, reason in reasons.items() if reason is not None}

    def generate(self, samples: Sequence[ModelInput]) -> list[str | SampleFailure]:
        return self.answer(samples, self.encode(samples))

    @torch.inference_mode()
    def answer(self, samples: Sequence[ModelInput], inputs: BatchFeature) -> list[str | SampleFailure]:
        """Answers from the batch's encoded inputs; samples the strict variant refuses fail on their own."""
        too_long = self.overflowing(samples, inputs)
        fitting = [s for i, s in enumerate(samples) if i not in too_long]
        answers: list[str | SampleFailure] = []
        usage: list[TokenUsage] = []
        if fitting:
            if too_long:
                inputs = self.encode(fitting)
            answers, usage = self.decode_batch(inputs.to(self.device))
        results: list[str | SampleFailure] = []
        self._usage = []
        for i in range(len(samples)):
            if i in too_long:
                results.append(SampleFailure(FailureKind.CONTEXT_OVERFLOW, too_long[i]))
                self._usage.append(TokenUsage(None, None))
            else:
                results.append(answers.pop(0))
                self._usage.append(usage.pop(0))
        return results

    def generation_kwargs(self, rows: int) -> dict[str, Any]:
        """``generate`` settings from the spec; a batch of ``rows`` gets ``rows`` times the time limit."""
        generation, limit = self.spec.generation, self.spec.sample_timeout_s
        return {
            "do_sample": generation.do_sample,
            "max_new_tokens": generation.max_new_tokens,
            "min_new_tokens": generation.min_new_tokens,
            "pad_token_id": self.processor.tokenizer.pad_token_id,
            **({"max_time": limit * rows} if limit else {}),
            **({"suppress_tokens": self.added_token_ids()} if self.execution.original_vocab_only else {}),
        }

    def added_token_ids(self) -> list[int]:
        """Ids the output layer has beyond the tokenizer's base vocabulary (a conversion's additions)."""
        rows = int(self.model.get_output_embeddings().weight.shape[0])
        return list(range(self.processor.tokenizer.vocab_size, rows))

    def official_prompt_len(self, inputs: BatchFeature) -> int:
        """The batch's prompt length as the official worker's ids count it (the stop criterion's window)."""
        return int(inputs["input_ids"].shape[1])

    def images_per_row(self, inputs: BatchFeature) -> list[int]:
        """Pictures of each row; classes that allow ``per_sample`` know their image ids and implement this."""
        raise NotImplementedError

    def split_rows(self, inputs: BatchFeature) -> Iterator[BatchFeature]:
        """Each sample's own inputs, without padding (per-sample decoding): its unpadded ids and its own
        pictures, one pixel row per picture in row order."""
        first = 0
        for i, count in enumerate(self.images_per_row(inputs)):
            keep = inputs["attention_mask"][i].bool()
            row = {
                "input_ids": inputs["input_ids"][i][keep][None],
                "attention_mask": inputs["attention_mask"][i][keep][None],
            }
            if count:
                row[self.pixel_key] = inputs[self.pixel_key][first : first + count]
            first += count
            yield BatchFeature(row)

    def decode_batch(self, inputs: BatchFeature) -> tuple[list[str | SampleFailure], list[TokenUsage]]:
        """Answers and token counts of a batch: one ``generate`` for the batch, or one per sample, each
        sample then timed on its own."""
        if self.execution.decoding is Decoding.BATCHED:
            return self.decode_rows(inputs)
        answers: list[str | SampleFailure] = []
        usage: list[TokenUsage] = []
        for row in self.split_rows(inputs):
            start = time.perf_counter()
            (answer,), (counts,) = self.decode_rows(row)
            answers.append(answer)
            usage.append(counts._replace(seconds=time.perf_counter() - start))
        return answers, usage

    def stopper(self, inputs: BatchFeature) -> RowStop | None:
        """The policy's stop strings as a stopping criterion for this batch; None without any. The
        official output the criterion judges starts with the BOS id (``stopping``)."""
        if not self.policy.stop_strings:
            return None
        bos = self.model.generation_config.bos_token_id
        return KeywordStop(
            self.policy.stop_strings,
            self.processor.tokenizer,
            int(inputs["input_ids"].shape[1]),
            self.official_prompt_len(inputs),
            [] if bos is None else [bos],
        )

    def generate_inputs(self, inputs: BatchFeature) -> dict[str, Any]:
        """What ``generate`` takes for a batch; its ``input_ids`` are the prompt the output starts with."""
        return dict(inputs)

    def new_tokens(self, inputs: BatchFeature, stop: RowStop | None) -> torch.Tensor:
        """The generated ids of each row (after its prompt). Sampling is seeded again per call, so a
        resumed job draws as an uninterrupted one; greedy decoding draws nothing (seeded once, at load)."""
        if self.spec.generation.do_sample:
            torch.manual_seed(self.spec.generation.seed)
        given = self.generate_inputs(inputs)
        rows, prompt_len = (int(n) for n in given["input_ids"].shape)
        with self.autocast():
            output = self.model.generate(
                **given, **self.generation_kwargs(rows), **({"stopping_criteria": [stop]} if stop else {})
            )
        return output[:, prompt_len:]

    def decode_rows(self, inputs: BatchFeature) -> tuple[list[str | SampleFailure], list[TokenUsage]]:
        """Greedy answers and token counts (input without padding, output without padding); rows cut
        short by the spec's time limit are timeouts."""
        tokenizer = self.processor.tokenizer
        rows = int(inputs["input_ids"].shape[0])
        limit = self.spec.sample_timeout_s
        stop = self.stopper(inputs)
        new_tokens = self.new_tokens(inputs, stop)
        usage = [
            TokenUsage(n, int((row != tokenizer.pad_token_id).sum()))
            for n, row in zip(self.input_lengths(inputs), new_tokens, strict=True)
        ]
        answers: list[str | SampleFailure] = [self.clean(text) for text in self.decoded(new_tokens)]
        if limit:
            max_new, eos = self.spec.generation.max_new_tokens, self.model.generation_config.eos_token_id
            answers = [
                timeout_failure(limit, rows, len(ids))
                if cut_by_time_limit(ids, max_new, eos) and not (stop and stop.row_done(row[None]))
                else answer
                for answer, ids, row in zip(answers, new_tokens.tolist(), new_tokens, strict=True)
            ]
        return answers, usage

    def decoded(self, new_tokens: torch.Tensor) -> list[str]:
        """Each row's new tokens as text, special tokens skipped, as the official worker decodes them."""
        texts: list[str] = self.processor.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return texts

    def clean(self, text: str) -> str:
        """The answer from the decoded new tokens: stripped, as the official worker does."""
        return text.strip()

    def last_usage(self) -> list[TokenUsage]:
        return list(self._usage)
