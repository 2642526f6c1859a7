"""Image-text-to-text models through ``transformers``: AutoProcessor, the processor's chat template and
AutoModelForImageTextToText, the same path for hub checkpoints and the kit's tiny ones.

The prompt becomes one user turn whose content parts are the text pieces and one image part per
placeholder, in prompt order, so interleaving is whatever the model's own template makes of it.
Families with prompt specifics subclass this adapter (``hf_llava``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import transformers
from packaging.version import Version
from PIL import Image
from transformers import AutoProcessor, BatchFeature, PreTrainedModel

from milebench.infer.adapter import AdapterError, SampleFailure, TokenUsage
from milebench.infer.hf_checkpoint import checkpoint
from milebench.infer.images import reading_image
from milebench.infer.time_limit import cut_by_time_limit, timeout_failure
from milebench.paths import RunPaths
from milebench.records import IMAGE_PLACEHOLDER, FailureKind, PreparedSample
from milebench.spec.model import ModelSpec

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


class HfImageTextToTextAdapter:
    """Greedy batched generation with left padding; seeded so any sampling path is reproducible too.

    Samples whose encoded input is longer than the spec's ``max_context_len`` fail as context
    overflow without being generated; the rest of the batch is answered.
    """

    version = f"1+transformers-{transformers.__version__}+torch-{torch.__version__}"
    model_class: ClassVar[str] = "AutoModelForImageTextToText"
    """The transformers class that loads the model, looked up at load time: the module then imports
    under the older transformers of the paper-era containers, and only a class they lack is an error."""

    def __init__(self, spec: ModelSpec, paths: RunPaths, data_root: Path) -> None:
        self.spec = spec
        self.data_root = data_root
        source, kwargs = checkpoint(spec, paths)
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.processor = self.load_processor(source, kwargs)
            self.model = self.load_model(source, kwargs)
        except (OSError, ValueError, ImportError) as err:
            raise AdapterError(f"model spec {spec.name!r}: cannot load {source} {kwargs}: {err}") from err
        self.processor.tokenizer.padding_side = "left"
        if self.processor.tokenizer.pad_token is None:
            self.processor.tokenizer.pad_token = self.processor.tokenizer.eos_token
        # transformers wraps PreTrainedModel.to with functools.wraps, which types it as unbound
        self.model.to(self.device).eval()  # type: ignore[arg-type]
        torch.manual_seed(spec.generation.seed)
        self._usage: list[TokenUsage] = []

    def load_model(self, source: str, kwargs: dict[str, Any]) -> GenerativeModel:
        """The model in bfloat16 on a GPU, float32 on the CPU."""
        model_class = getattr(transformers, self.model_class, None)
        if model_class is None:
            raise AdapterError(
                f"model spec {self.spec.name!r}: transformers {transformers.__version__} has no "
                f"{self.model_class}; run it in a container with a newer transformers"
            )
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        return model_class.from_pretrained(source, **{DTYPE_ARGUMENT: dtype}, **kwargs)

    def load_processor(self, source: str, kwargs: dict[str, Any]) -> Any:
        """What turns a prompt and its images into model inputs: the checkpoint's own processor."""
        return AutoProcessor.from_pretrained(source, **kwargs)

    def render(self, sample: PreparedSample) -> str:
        """The model's text input: one user turn through the processor's chat template."""
        conversation = [{"role": "user", "content": split_segments(sample.prompt)}]
        return self.processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)

    def load_images(self, sample: PreparedSample) -> list[Image.Image]:
        images = []
        for rel in sample.images:
            with reading_image(sample, rel), Image.open(self.data_root / rel) as img:
                images.append(img.convert("RGB"))
        return images

    def encode(self, samples: Sequence[PreparedSample]) -> BatchFeature:
        """Token ids (image tokens expanded), attention mask and pixel inputs of a batch."""
        texts = [self.render(s) for s in samples]
        images = [img for s in samples for img in self.load_images(s)]
        return self.processor(text=texts, images=images or None, return_tensors="pt", padding=True)

    def overflowing(self, samples: Sequence[PreparedSample], inputs: BatchFeature) -> dict[int, str]:
        """Index -> reason for the samples longer than the model's context."""
        limit = self.spec.max_context_len
        if limit is None:
            return {}
        lengths = inputs["attention_mask"].sum(dim=1).tolist()
        return {
            i: f"input of {n} tokens exceeds max_context_len {limit}"
            for i, n in enumerate(lengths)
            if n > limit
        }

    def generate(self, samples: Sequence[PreparedSample]) -> list[str | SampleFailure]:
        return self.answer(samples, self.encode(samples))

    @torch.inference_mode()
    def answer(self, samples: Sequence[PreparedSample], inputs: BatchFeature) -> list[str | SampleFailure]:
        """Answers from the batch's encoded inputs; samples longer than the context fail on their own."""
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
        }

    def decode_batch(self, inputs: BatchFeature) -> tuple[list[str | SampleFailure], list[TokenUsage]]:
        """Greedy answers and token counts (input without padding, output without padding); rows cut
        short by the spec's time limit are timeouts. Sampling is seeded again per batch, so a resumed job
        draws as an uninterrupted one; greedy decoding draws nothing (seeded once, at load)."""
        if self.spec.generation.do_sample:
            torch.manual_seed(self.spec.generation.seed)
        tokenizer = self.processor.tokenizer
        rows = int(inputs["input_ids"].shape[0])
        limit = self.spec.sample_timeout_s
        output = self.model.generate(**inputs, **self.generation_kwargs(rows))
        new_tokens = output[:, inputs["input_ids"].shape[1] :]
        usage = [
            TokenUsage(int(mask.sum()), int((row != tokenizer.pad_token_id).sum()))
            for mask, row in zip(inputs["attention_mask"], new_tokens, strict=True)
        ]
        answers: list[str | SampleFailure] = [
            text.strip() for text in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        ]
        if limit:
            max_new, eos = self.spec.generation.max_new_tokens, self.model.generation_config.eos_token_id
            answers = [
                timeout_failure(limit, rows, len(row)) if cut_by_time_limit(row, max_new, eos) else answer
                for answer, row in zip(answers, new_tokens.tolist(), strict=True)
            ]
        return answers, usage

    def last_usage(self) -> list[TokenUsage]:
        return list(self._usage)
