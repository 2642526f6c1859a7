"""How a model is run, as data: prompt template, image preprocessing, tokenization, decoding loop, dtype,
stop strings, and which tokenizer counts.

A model spec states the choices of the run the paper reports (``execution``); every faster or newer
way of running it is a named variant of ``execution.variants``, which a run spec selects per model
(``RunSpec.execution``). A selected variant replaces the choices and names itself in
``applied_variant``, so it enters every prediction's cache key and the job's provenance: a variant is
never used silently. A spec without ``execution`` runs with its adapter's defaults
(its module's declared ``execution``, :data:`GENERIC`); :mod:`milebench.spec.model_execution` resolves
which choices a model spec runs with.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, ValidationError, model_validator

from milebench.spec.base import Spec, describe_errors
from milebench.spec.templates import TemplateName

CHAT_TEMPLATE = "chat_template"
"""The default prompt template: the checkpoint processor's own chat template (milebench.spec.templates says
where each template is declared)."""


class ImagePreprocessing(StrEnum):
    PAD_TO_SQUARE = "pad_to_square"
    """LLaVA's ``expand2square``: each picture is centred on a square of its longer side filled with the
    image processor's mean colour (``int(x * 255)`` per channel), then the processor runs; the official
    worker's ``process_images`` with ``image_aspect_ratio: pad``."""
    PROCESSOR = "processor"
    """The image processor alone (for CLIP: resize the shorter side, then centre-crop)."""


class ImageSequence(StrEnum):
    """How a task's pictures reach a video model: MileBench gives every task as a sequence of images."""

    IMAGES = "images"
    """Each picture through the model's image input, at its own placeholder."""
    VIDEO_FRAMES = "video_frames"
    """All of a sample's pictures, in order, as the frames of one video through the model's video input."""


class ImageBackend(StrEnum):
    """Which implementation of the image processor runs: transformers 5 defaults to torchvision when it
    is installed, whose resizing differs from the PIL code the paper-era stack ran."""

    PIL = "pil"
    DEFAULT = "default"


class Tokenization(StrEnum):
    PER_CHUNK = "per_chunk"
    """LLaVA's ``tokenizer_image_token``: the text between image tokens is tokenized chunk by chunk
    (LLaVA: each with the tokenizer's special tokens, the BOS of every later chunk dropped; ALLaVA's
    copy: without special tokens) and one image id joins the chunks. SentencePiece tokenizers may give
    other ids than for the whole string."""
    WHOLE = "whole"
    """The processor tokenizes the whole text."""


class Decoding(StrEnum):
    PER_SAMPLE = "per_sample"
    """One ``generate`` call per sample, unpadded: the official worker's loop."""
    BATCHED = "batched"
    """One ``generate`` call per batch with left padding: faster; padding can change greedy outputs."""


class Backend(StrEnum):
    """The engine that runs the model: ``transformers`` (the kit's adapters) or vLLM (a variant only;
    ``milebench.infer.vllm_backend``)."""

    TRANSFORMERS = "transformers"
    VLLM = "vllm"


class Dtype(StrEnum):
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"


class Autocast(StrEnum):
    """``torch.autocast`` around ``generate`` on a GPU."""

    OFF = "off"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"


class Aspect(StrEnum):
    """The parts of running a model that can change its answers, as the report's fidelity table
    lists them; the execution fields each one covers are in :data:`ASPECT_FIELDS`."""

    PROMPT = "prompt"
    IMAGES = "images"
    TOKENIZATION = "tokenization"
    DECODING = "decoding"
    PRECISION = "precision"
    STOP = "stop"
    TOKENIZER = "tokenizer"
    """Which tokenizer counts tokens for truncation and tokenizes the input (no field: the checkpoint's)."""


ASPECT_FIELDS: dict[Aspect, tuple[str, ...]] = {
    Aspect.PROMPT: ("prompt_template",),
    Aspect.IMAGES: ("image_preprocessing", "image_backend", "image_sequence"),
    Aspect.TOKENIZATION: ("tokenization", "original_vocab_only"),
    Aspect.DECODING: ("decoding", "backend"),
    Aspect.PRECISION: ("dtype", "autocast"),
    Aspect.STOP: ("stop_strings",),
    Aspect.TOKENIZER: (),
}


class ExecutionVariant(Spec):
    """A named way of running the model other than the paper's: the choices it states replace the
    model's; the others stay."""

    description: str = Field(description="What the variant changes and why one would use it.")
    prompt_template: TemplateName | None = None
    image_preprocessing: ImagePreprocessing | None = None
    image_backend: ImageBackend | None = None
    image_sequence: ImageSequence | None = Field(default=None, exclude_if=lambda value: value is None)
    """Left out of dumps when unset, so the variants written before it keep their hashes."""
    tokenization: Tokenization | None = None
    decoding: Decoding | None = None
    dtype: Dtype | None = None
    autocast: Autocast | None = None
    stop_strings: tuple[str, ...] | None = None
    original_vocab_only: bool | None = None
    backend: Backend | None = Field(default=None, exclude_if=lambda value: value is None)
    """Left out of dumps when unset, so the variants written before it keep their hashes."""
    container: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="The image family (folder under containers/) the variant runs in instead of the "
        "model's own: where its backend is installed. Not an execution choice: the run's model spec "
        "takes it. Left out of dumps when unset, so the variants written before it keep their hashes.",
    )


class Execution(Spec):
    """The choices a model runs with. Defaults are the kit's generic transformers path."""

    prompt_template: TemplateName = CHAT_TEMPLATE
    image_preprocessing: ImagePreprocessing = ImagePreprocessing.PROCESSOR
    image_backend: ImageBackend = ImageBackend.DEFAULT
    image_sequence: ImageSequence = Field(
        default=ImageSequence.IMAGES,
        exclude_if=lambda value: value is ImageSequence.IMAGES,
        description="How the sample's pictures reach the model: each at its placeholder through the image "
        "input, or together as the frames of one video (video models). Left out of dumps when it is "
        "images, so the specs written before it keep their hashes and cache keys.",
    )
    tokenization: Tokenization = Tokenization.WHOLE
    decoding: Decoding = Decoding.BATCHED
    dtype: Dtype = Field(
        default=Dtype.BFLOAT16,
        description="The weights' dtype on a GPU; on a CPU the kit runs float32 (half-precision CPU "
        "kernels are slow and differ by build).",
    )
    autocast: Autocast = Field(default=Autocast.OFF, description="On a GPU, generate under torch.autocast.")
    stop_strings: tuple[str, ...] = Field(
        default=(),
        description="LLaVA's KeywordsStoppingCriteria: generation stops when the new tokens end with a "
        "string's token ids or the decoded tail holds it; the string stays in the answer, as officially.",
    )
    original_vocab_only: bool = Field(
        default=False,
        description="Never generate ids at or above the tokenizer's base vocabulary: the tokens a hub "
        "conversion added (llava-hf's <image>, <pad> and embedding padding) that the original model lacks.",
    )
    backend: Backend = Field(
        default=Backend.TRANSFORMERS,
        exclude_if=lambda value: value is Backend.TRANSFORMERS,
        description="The engine: transformers, or vllm for a variant. Left out of dumps when it is "
        "transformers, so the specs written before it keep their hashes and cache keys.",
    )
    deviations: dict[Aspect, str] = Field(
        default_factory=dict,
        description="Where these choices still differ from the run the paper reports, and why, by aspect; "
        "an aspect not named is as that run had it (the report's fidelity table shows both).",
    )
    no_official_worker: str | None = Field(
        default=None,
        description="Set where the official code ships no worker for the model, so the paper's run of it "
        "is not published: what these choices follow instead. An aspect not in deviations is then "
        "unknown against that run, never as official.",
    )
    source: str | None = Field(default=None, description="Where these choices come from.")
    variants: dict[str, ExecutionVariant] = Field(
        default_factory=dict, description="Other named ways to run the model; a run spec selects one."
    )
    applied_variant: str | None = Field(
        default=None,
        description="Set by the kit to the variant a run selected (never in a spec file); null: the "
        "model's own choices.",
    )

    @model_validator(mode="after")
    def _variants_apply(self) -> Execution:
        bad = [name for name in self.variants if not name or name == PAPER]
        if bad:
            raise ValueError(f"variant names must be non-empty and not {PAPER!r}: {bad}")
        for name in self.variants:
            try:
                self.with_variant(name)
            except ValidationError as err:
                raise ValueError(f"variant {name!r}: {describe_errors(err)}") from None
        return self

    @property
    def label(self) -> str:
        """``paper`` or the applied variant's name."""
        return self.applied_variant or PAPER

    def with_variant(self, name: str) -> Execution:
        """These choices with variant ``name`` applied (``paper``: unchanged)."""
        if name == PAPER:
            return self
        if name not in self.variants:
            known = ", ".join([PAPER, *sorted(self.variants)])
            raise KeyError(f"no execution variant {name!r} (known: {known})")
        # Not choices: the variant's text, and the image it runs in (the model spec's, see for_run).
        changes = self.variants[name].model_dump(exclude={"description", "container"}, exclude_none=True)
        return Execution.model_validate(
            {**self.model_dump(), **changes, "variants": {}, "applied_variant": name}
        )


PAPER = "paper"
"""The name of a model's own choices, as a run spec selects them."""


GENERIC = Execution(source="the kit's transformers path: the checkpoint's processor and chat template")
"""The execution of a spec that states none, where its adapter declares ``execution: generic``. API models
and baselines have none: the provider or the kit's own code decides. The remote-code adapters
(Qwen-VL-Chat, ALLaVA) have none either: their spec states how the checkpoint's code runs, or they refuse
to load."""
