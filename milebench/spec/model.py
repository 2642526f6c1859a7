"""ModelSpec: one model of the paper's table (or a baseline) and everything needed to run it."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictInt, model_validator

from milebench.spec.adapters import KIND, UNPORTED, adapter_kinds, tiny_families
from milebench.spec.base import Number, Spec, registered
from milebench.spec.context import (
    BUDGET_FIELDS,
    REQUIRED_FIELDS,
    ContextSources,
    SourceKind,
    source_problems,
)
from milebench.spec.execution import Backend, Execution
from milebench.spec.pinned_file import ArchiveEntry

MODEL_NAME = r"^[a-z0-9][a-z0-9.-]*$"
"""A model's name: a folder name of its predictions and scores, never a path."""


class Section(StrEnum):
    """The row blocks of the paper's main table."""

    BASELINE = "baseline"
    CLOSED = "closed"
    OPEN_IMAGE = "open-image"
    OPEN_VIDEO = "open-video"
    KIT = "kit"
    """Models the kit builds for smoke runs and tests; never part of the paper's table."""
    USER = "user"
    """A user's own model (a served endpoint, a checkpoint); never part of the paper's table."""


AdapterKind = Annotated[
    str,
    Field(
        pattern=KIND,
        description="A registered adapter family (an entry point of group milebench.adapters; checked "
        "when the spec loads), or ``unported``: the model needs its original code base.",
    ),
    AfterValidator(lambda kind: registered(kind, (*adapter_kinds("generate"), UNPORTED), "adapter")),
]
"""Model families the engine knows, as they are registered (milebench.spec.adapters)."""


class ImageInput(StrEnum):
    """How a sample's images reach the model: interleaved in the prompt or tiled into one picture."""

    INTERLEAVED = "interleaved"
    COMBINED = "combined"


class HubWeights(Spec):
    """Weights on the Hugging Face hub; ``revision: null`` defers to ``specs/locks/weights.lock.yaml``."""

    kind: Literal["hf"]
    repo_id: str
    revision: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    trust_remote_code: StrictBool = False


class ApiLimits(Spec):
    """How hard the kit may call an API: execution settings, not part of what an answer depends on."""

    concurrency: StrictInt = Field(default=4, ge=1, description="Requests in flight at once.")
    requests_per_minute: Number | None = Field(default=None, gt=0, description="null: no rate limit.")
    timeout_s: Number = Field(
        default=120.0,
        gt=0,
        description="Whole request, from connecting to the last byte of the answer; a request still "
        "running then is cut and counts as a timeout.",
    )
    max_retries: StrictInt = Field(
        default=5, ge=0, description="Retries after the first try (429, 5xx, timeouts)."
    )
    backoff_s: Number = Field(default=2.0, ge=0, description="First backoff; doubles per retry, with jitter.")
    max_backoff_s: Number = Field(default=60.0, ge=0)
    max_retry_wait_s: Number = Field(
        default=120.0,
        ge=0,
        description="Longest wait a server may ask for (Retry-After); a longer one fails the sample "
        "instead of sleeping.",
    )
    max_response_bytes: StrictInt = Field(
        default=2**20, ge=1, description="Largest answer body read; a larger one fails the sample."
    )


class ApiPricing(Spec):
    """List prices in USD per 1,000 tokens; null when unknown (``notes`` says why)."""

    price_per_1k_input: Number | None = Field(default=None, ge=0)
    price_per_1k_output: Number | None = Field(default=None, ge=0)


class ApiModel(Spec):
    kind: Literal["api"]
    provider: Literal["openai", "anthropic", "google"]
    model_id: str
    base_url: str | None = Field(
        default=None,
        pattern=r"^https?://\S+$",
        description="Overrides the provider's URL; the environment can override it again.",
    )
    keyless: StrictBool = Field(
        default=False,
        exclude_if=lambda value: not value,
        description="The endpoint takes no key (a local server): none is read or sent. Left out of dumps "
        "when false, so the specs written before it keep their hashes.",
    )
    limits: ApiLimits = ApiLimits()
    pricing: ApiPricing = ApiPricing()


class BuiltinModel(Spec):
    """A baseline implemented by the kit itself (Random, oracle)."""

    kind: Literal["builtin"]


TinyFamily = Annotated[
    str,
    Field(pattern=KIND, description="A tiny family a registered adapter declares."),
    AfterValidator(lambda family: registered(family, tiny_families(), "tiny family")),
]
"""The tiny families the adapters declare."""


class TinyWeights(Spec):
    """A tiny random-weight checkpoint the kit builds offline from a config (smoke runs, tests)."""

    kind: Literal["tiny"]
    family: TinyFamily
    seed: StrictInt = 0


class ExternalWeights(Spec):
    """Weights published outside the hub (or not yet identified there); ``notes`` says where to look."""

    kind: Literal["external"]
    url: str | None = Field(default=None, description="Where the original code base or checkpoint lives.")


class WeightFile(ArchiveEntry):
    """One file of a checkpoint distributed outside the hub: fetched from ``url`` into the weights cache
    and used only once its size and sha256 match (``null``: taken from the weights lock; unresolved
    there, the model refuses to load until ``milebench lock-weights`` records them)."""

    url: str = Field(description="Where the file is downloaded from (http, https or file).")
    source: str = Field(description="Where the URL, and the size and sha256 where given, are stated.")


class UrlWeights(Spec):
    """A checkpoint whose parts are files distributed outside the hub (``files``), completing a hub
    model (``base``: the language model they were trained on, pinned like hub weights)."""

    kind: Literal["url"]
    files: tuple[WeightFile, ...] = Field(min_length=1)
    base: HubWeights | None = None

    @model_validator(mode="after")
    def _names_unique(self) -> UrlWeights:
        names = [f.name for f in self.files]
        if len(set(names)) != len(names):
            raise ValueError(f"files: each name once (they are files of one folder): {names}")
        return self


Weights = Annotated[
    HubWeights | ApiModel | BuiltinModel | TinyWeights | ExternalWeights | UrlWeights,
    Field(discriminator="kind"),
]


class Generation(Spec):
    """Decoding settings; the paper decodes greedily with 1..512 new tokens."""

    do_sample: Literal[False] = False
    max_new_tokens: StrictInt = Field(default=512, ge=1, le=512)
    min_new_tokens: StrictInt = Field(default=1, ge=0)
    seed: StrictInt = 0


class BatchRule(Spec):
    """Official batching: ``max(batch_image // n_images, 1)`` samples per batch, 1 for some tasks."""

    batch_image: StrictInt = Field(default=24, ge=1)
    single_sample_tasks: tuple[str, ...] = ("MMCoQA", "GPR1200")


class ModelSpec(Spec):
    name: str = Field(pattern=MODEL_NAME)
    display_name: str
    paper_name: str | None = Field(default=None, description="The row label in the paper's table.")
    section: Section
    size: str | None = Field(default=None, description='Parameter count as printed ("7B").')
    adapter: AdapterKind
    weights: Weights
    image_input: ImageInput = ImageInput.INTERLEAVED
    max_context_len: StrictInt | None = Field(default=None, gt=0)
    n_tokens_per_image: StrictInt | None = Field(default=None, ge=0)
    max_images: StrictInt | None = Field(default=None, gt=0)
    context_sources: ContextSources = Field(
        default_factory=ContextSources,
        description="Where max_context_len, n_tokens_per_image and max_images come from (kind none: "
        "unknown, and why). Required for the paper's models (those with a paper_name).",
    )
    tokenizer: str | None = Field(
        default=None, description="Hub id of the tokenizer used to count tokens when the model is absent."
    )
    generation: Generation = Generation()
    batch: BatchRule = BatchRule()
    sample_timeout_s: Number | None = Field(
        default=None,
        gt=0,
        description=(
            "Local models: seconds of generation per sample (a batch of n gets n times this); a sample "
            "still unfinished then is recorded as a timeout. null: no limit."
        ),
    )
    container: str | None = Field(default=None, description="Folder under containers/ holding its image.")
    notes: str | None = None
    execution: Execution | None = Field(
        default=None,
        description="How the model is run (template, images, decoding loop, dtype, stop strings) and its "
        "named variants; null: the adapter's defaults (its declaration's ``execution``).",
    )

    @property
    def paper_model(self) -> bool:
        """One of the models the paper evaluated: a row of its table other than the Random baseline. Each
        traces its context settings to a source."""
        return self.paper_name is not None and not self.builtin

    @property
    def builtin(self) -> bool:
        """A baseline the kit answers itself: it reads no context, so it has no budget."""
        return isinstance(self.weights, BuiltinModel)

    @model_validator(mode="after")
    def _sources_match(self) -> ModelSpec:
        values = {name: getattr(self, name) for name in BUDGET_FIELDS}
        problems = source_problems(values, self.context_sources, self.paper_model)
        if problems:
            raise ValueError("; ".join(f"{where}: {message}" for where, message in problems))
        return self

    @model_validator(mode="after")
    def _backends_have_images(self) -> ModelSpec:
        """A model run in an image runs a vllm variant in another one: its own image has no vllm, and a
        docker job of the variant would otherwise stop only when it loads."""
        if self.container is None or self.execution is None:
            return self
        missing = [
            name
            for name, variant in self.execution.variants.items()
            if variant.backend is Backend.VLLM and variant.container is None
        ]
        if missing:
            raise ValueError(
                "; ".join(
                    f"execution.variants.{name}.container: required with backend vllm (the model's image "
                    f"{self.container!r} has no vllm): the image family the variant runs in, e.g. vllm"
                    for name in missing
                )
            )
        return self

    @model_validator(mode="after")
    def _unknowns_explained(self) -> ModelSpec:
        def explained(name: str) -> bool:
            source = getattr(self.context_sources, name)
            return source is not None and source.kind is SourceKind.NONE

        unknown = [
            name
            for name in REQUIRED_FIELDS
            if getattr(self, name) is None and not self.builtin and not explained(name)
        ]
        if self.adapter == UNPORTED:
            unknown.append("adapter")
        if unknown and not self.notes:
            raise ValueError(f"notes must explain the unknown or unported fields: {', '.join(unknown)}")
        return self
