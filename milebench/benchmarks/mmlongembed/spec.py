"""Specs of the MMLongEmbed runs and embedders, under ``specs/mmlongembed/`` (strict, like MileBench's)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, RootModel, StrictInt, model_validator

from milebench.benchmarks import mmlongembed
from milebench.benchmarks.mmlongembed.metrics import Ties
from milebench.benchmarks.mmlongembed.task_spec import RealTask
from milebench.benchmarks.mmlongembed.tokenizer_spec import HubTokenizer, PackageTokenizer, TokenizerRef
from milebench.spec.base import Number, Spec, SpecError, tolerance_field
from milebench.spec.folder import load_kind, overlay_base, resolve_file
from milebench.spec.model import ApiLimits
from milebench.spec.names import by_name

PAPER_BINS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
PAPER_DEPTHS = (0, 20, 40, 60, 80, 100)


class Modality(StrEnum):
    TEXT = "text"
    IMAGE = "image"
    MIXED = "mixed"


class BundledHaystack(Spec):
    """The public-domain prose bundled with the kit and generated images."""

    kind: Literal["bundled"]


class FileHaystack(Spec):
    """Interleaved documents a user has: OBELICS (``texts``/``images`` lists) or MM-NIAH-style
    (``context`` with ``<image>`` placeholders and ``images_list``) JSONL; image paths relative to it
    and confined to its folder."""

    kind: Literal["obelics", "mm-niah"]
    path: str
    image_map: str | None = Field(
        default=None,
        description="OBELICS names its images by URL: a JSONL of {url, path} (paths relative to it) for"
        " the downloaded ones; a URL it lacks is left out of the document.",
    )


HaystackSource = Annotated[BundledHaystack | FileHaystack, Field(discriminator="kind")]


class NeedleFiles(Spec):
    """Needles from the paper's sources instead of the kit's families (``needle_sources``: formats and the
    model-assisted steps' outputs); paths relative to the specs folder unless absolute."""

    text: str | None = Field(default=None, description="NeedleBench's needles.jsonl.")
    text_lookalikes: str | None = Field(default=None, description="The look-alike writer's output.")
    image: str | None = Field(default=None, description="An MM-NIAH retrieval-image JSONL.")
    image_queries: str | None = Field(default=None, description="The image describer's output.")

    @model_validator(mode="after")
    def _pairs(self) -> NeedleFiles:
        for source, step in (("text", "text_lookalikes"), ("image", "image_queries")):
            if (getattr(self, source) is None) != (getattr(self, step) is None):
                raise ValueError(f"{source} and {step} go together")
        return self


class VisualGrounding(Spec):
    """The needle-in-a-haystack task: one pool of candidates per length x depth x modality cell."""

    seed: StrictInt = 0
    bins: tuple[Annotated[StrictInt, Field(ge=64)], ...] = PAPER_BINS
    depths: tuple[Annotated[StrictInt, Field(ge=0, le=100)], ...] = PAPER_DEPTHS
    families: StrictInt = Field(
        default=5, ge=1, le=5, description="Needle families per needle modality; each has 5 look-alikes."
    )
    image_families: StrictInt | None = Field(
        default=None, ge=1, le=5, description="Image needle families, where not ``families``."
    )
    needle_modalities: tuple[Literal["text", "image"], ...] = ("text", "image")
    interference: tuple[Modality, ...] = (Modality.TEXT, Modality.IMAGE, Modality.MIXED)
    haystack: HaystackSource = BundledHaystack(kind="bundled")
    needles: NeedleFiles | None = Field(
        default=None, description="Needles from the paper's sources; the kit's own families where unset."
    )

    def families_of(self, modality: str) -> int:
        """Needle families of a needle modality."""
        return (
            self.image_families if modality == "image" and self.image_families is not None else self.families
        )


class EmbedRunSpec(Spec):
    name: str
    benchmark: Literal["mmlongembed"]
    description: str = ""
    out: str = Field(default="", description="Output folder; default results/<name>.")
    models: tuple[str, ...]
    counting_tokenizer: TokenizerRef = Field(
        description="Counts text tokens for the length bins (the paper: Qwen3's tokenizer)."
    )
    visual_grounding: VisualGrounding
    heatmap_k: StrictInt = Field(default=5, ge=1, description="The heatmap's Hit@k (the paper's 'P@5').")
    tolerance: Number = tolerance_field()
    cutoffs: tuple[StrictInt, ...] = (1, 5, 10)
    ties: Ties = Field(
        default="expected",
        description="Equal scores: 'expected', each metric's expectation over every order of the tied"
        " candidates (McSherry and Najork 2008); 'trec_eval', ties broken by candidate id descending.",
    )
    real_tasks: tuple[RealTask, ...] = Field(
        default=(), description="Real-task datasets built from the user's files (one set each)."
    )

    @model_validator(mode="after")
    def _default_out(self) -> EmbedRunSpec:
        if not self.out:
            object.__setattr__(self, "out", f"results/{self.name}")
        return self

    @model_validator(mode="after")
    def _one_cq_per_task(self) -> EmbedRunSpec:
        names = [t.dataset for t in self.real_tasks]
        if len(set(names)) != len(names):
            raise ValueError(f"real_tasks: dataset names must be unique: {names}")
        first: dict[str, int] = {}
        for t in self.real_tasks:
            if first.setdefault(t.task, t.candidates) != t.candidates:
                raise ValueError(
                    f"real_tasks: {t.dataset}: candidates {t.candidates} differs from the {t.task} datasets"
                    f" before it ({first[t.task]}): C/Q must be the same across a task's pools"
                )
        return self


class Lineage(Spec):
    """Where a model stands in its family: the scale test pairs a family's largest ``scale`` with its
    smallest. ``scale`` is any number that orders the members (the paper's: billions of parameters); a
    member whose scale is not published names its family and takes no part in the test."""

    family: str | None = None
    scale: Number | None = None

    @model_validator(mode="after")
    def _scale_with_family(self) -> Lineage:
        if self.scale is not None and self.family is None:
            raise ValueError("scale needs a family: the scale test compares members of one family")
        return self


LINEAGE = frozenset(Lineage.model_fields)
"""Fields that pair models for the scale test and change no embedding: kept out of the hashes that key
the embedding cache and re-run jobs."""


class SentenceTransformersModel(Lineage):
    """A text embedding model run with sentence-transformers; images in candidates are dropped."""

    name: str
    kind: Literal["sentence-transformers"]
    weights: PackageTokenizer | HubTokenizer = Field(description="Where the model folder comes from.")
    window: StrictInt = Field(ge=8, description="Tokens the model reads, special tokens included.")
    batch_size: StrictInt = Field(default=32, ge=1)


class Bm25Model(Lineage):
    """Lexical baseline (bm25s); the index of each pool is the pool itself; images are dropped."""

    name: str
    kind: Literal["bm25"]
    k1: Number = 1.5
    b: Number = 0.75
    method: Literal["robertson", "atire", "bm25l", "bm25+", "lucene"] = "lucene"


class TinyEmbedWeights(Spec):
    """A tiny random-weight checkpoint of the spec's backbone, built offline from a config (smoke runs,
    tests) and loaded through ``from_pretrained`` like a hub one."""

    kind: Literal["tiny"]
    seed: StrictInt = 0


CONTENT = "{content}"
INSTRUCTION = "{instruction}"


class VlmEmbedder(Lineage):
    """A Qwen2-VL / Qwen3-VL embedding model (GME, Qwen3-VL-Embedding, VLM2Vec, Ops-MM-embedding,
    RzenEmbed, Embed-RL): text and images in document order inside the family's prompt frame,
    last-token pooling, L2 normalisation, cosine similarity. A family differs only in what is stated
    here; ``kind`` is the backbone."""

    name: str
    kind: Literal["hf-qwen2-vl-embed", "hf-qwen3-vl-embed"]
    weights: HubTokenizer | TinyEmbedWeights = Field(discriminator="kind")
    window: StrictInt = Field(ge=8, description="Tokens the model reads, frame and image tokens included.")
    loader_window: StrictInt | None = Field(
        default=None, description="The length limit of the family's own loader (raised here to window)."
    )
    dimension: StrictInt | None = Field(default=None, ge=1, description="Embedding size, as published.")
    template: str = Field(
        description="The prompt frame: one {instruction} and one {content}, everything else literal text."
    )
    query_instruction: str = Field(description="The instruction a query is framed with.")
    document_instruction: str = Field(description="The instruction a candidate is framed with.")
    image_placeholder: str = Field(
        default="<|vision_start|><|image_pad|><|vision_end|>",
        description="What stands for one image in the content; its image pad is expanded per image.",
    )
    separator: str = Field(default=" ", description="Between two adjacent text segments.")
    added_tokens: tuple[str, ...] = Field(
        default=(),
        description="Tokens the family's own code adds to the tokenizer at load (Embed-RL: <emb>).",
    )
    min_image_tokens: StrictInt = Field(ge=1, description="The image processor's lower bound, in tokens.")
    max_image_tokens: StrictInt = Field(ge=1, description="The image processor's upper bound, in tokens.")
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    sources: tuple[str, ...] = Field(default=(), description="Where each stated fact comes from.")
    notes: str = ""

    @model_validator(mode="after")
    def _frame(self) -> VlmEmbedder:
        problems = [
            f"must hold {marker} exactly once"
            for marker in (INSTRUCTION, CONTENT)
            if self.template.count(marker) != 1
        ]
        if problems:
            raise ValueError(f"template {'; '.join(problems)}")
        if self.min_image_tokens > self.max_image_tokens:
            raise ValueError("min_image_tokens is above max_image_tokens")
        return self


class ApiEmbedder(Lineage):
    """A proprietary multimodal embedding service (Doubao seed1.6-embedding on Volcengine Ark)."""

    name: str
    kind: Literal["ark-multimodal-embed"]
    model_id: str = Field(description="The model (or endpoint) id the request names.")
    base_url: str | None = Field(default=None, description="Default endpoint; the environment overrides it.")
    window: StrictInt = Field(ge=8, description="Tokens the service reads (by the paper's counting rule).")
    tokenizer: TokenizerRef = Field(
        description="Cuts a text segment on a window boundary (the service's own tokenizer is not public; "
        "the paper counts with Qwen3's)."
    )
    dimension: StrictInt | None = Field(default=None, ge=1)
    query_instruction: str = ""
    document_instruction: str = ""
    limits: ApiLimits = ApiLimits()
    sources: tuple[str, ...] = ()
    notes: str = ""


AnyEmbedder = SentenceTransformersModel | Bm25Model | VlmEmbedder | ApiEmbedder
EmbedderSpec = Annotated[AnyEmbedder, Field(discriminator="kind")]


class EmbedderFile(RootModel[EmbedderSpec]):
    """One embedder spec file, its ``kind`` picking the model."""

    @property
    def name(self) -> str:
        return self.root.name


@dataclass(frozen=True)
class EmbedSpecs:
    root: Path
    runs: dict[str, EmbedRunSpec]
    models: dict[str, AnyEmbedder]
    base: Path | None = None
    """The shipped folder ``root`` overlays; None when ``root`` is whole."""

    def run(self, name: str) -> EmbedRunSpec:
        return by_name(self.runs, name, "run", self.root / "runs")

    def file(self, relative: str | Path) -> Path:
        """Where the file at ``relative`` (the paper spec) comes from: the overlay's own, else the
        shipped one."""
        return resolve_file(self.root, self.base, relative)


def specs_folder(specs_root: Path) -> Path:
    """MMLongEmbed's folder under ``specs_root``, as its declaration names it."""
    return mmlongembed.BENCHMARK.folder(specs_root)


def load_embed_specs(specs_root: Path) -> EmbedSpecs:
    """Runs and embedders under ``<specs>/mmlongembed/`` (over the shipped ones where ``specs_root`` is
    an overlay), with each run's model names checked."""
    root = specs_folder(specs_root)
    shipped = overlay_base(specs_root)
    base = None if shipped is None else specs_folder(shipped)
    models = {name: model.root for name, (_, model) in load_kind(root, "models", EmbedderFile, base).items()}
    runs = load_kind(root, "runs", EmbedRunSpec, base)
    for path, run in runs.values():
        unknown = [
            (f"models.{i}", f"unknown model {m!r}") for i, m in enumerate(run.models) if m not in models
        ]
        if unknown:
            raise SpecError(path, unknown)
    return EmbedSpecs(root=root, runs={k: v for k, (_, v) in runs.items()}, models=models, base=base)
