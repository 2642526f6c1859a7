"""RunSpec: which models x tasks x modes to run, on which data, and where outputs land."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, TypeVar

from pydantic import AfterValidator, Discriminator, Field, StrictBool, StrictInt, Tag

from milebench.image_files import MAX_IMAGE_PIXELS
from milebench.spec.base import Number, Spec, tolerance_field
from milebench.spec.deployment import IMAGE_REGISTRY, Deployment, DockerJobs
from milebench.spec.policy import DEFAULT_POLICY, ContextOverflow

RUN_NAME = r"^[a-z0-9][a-z0-9_-]*$"
"""A run's name: a folder name of its results and reports, never a path."""


class Mode(StrEnum):
    """The three ways the paper runs a model over a task."""

    MULTI_IMAGE = "multi-image"
    COMBINED_IMAGE = "combined-image"
    ADVERSARIAL = "adversarial"


class HubSource(Spec):
    """The dataset repo on the Hugging Face hub; repo, revision and checksums come from the lock."""

    kind: Literal["hub"]
    lock: str = Field(description="Lock file, relative to the specs folder.")


class MirrorSource(Spec):
    """A copy of the archives at an http(s) URL or a local folder, verified against a lock."""

    kind: Literal["mirror"]
    url: str
    lock: str = Field(description="Lock file, relative to the specs folder.")


class LocalSource(Spec):
    """An already extracted ``MileBench/`` tree; nothing is downloaded, the tree is validated."""

    kind: Literal["local"]
    path: str


class FixtureSource(Spec):
    """The generated mini-MileBench, packed as archives and fetched like a mirror."""

    kind: Literal["fixture"]
    seed: StrictInt = 0
    samples_per_task: StrictInt = Field(default=3, ge=1)


class TruncationMode(StrEnum):
    """How a prompt is cut to a model's context: ``paper`` follows the official code (text decoded back
    from token ids), ``clean`` cuts the original text at token offsets so kept text stays exact."""

    PAPER = "paper"
    CLEAN = "clean"


class CombinedSource(StrEnum):
    """Where combined-image pictures come from: the data's pre-made ``combined_1_images`` or the kit."""

    UPSTREAM = "upstream"
    KIT = "kit"


T = TypeVar("T")


def _unique(values: tuple[T, ...]) -> tuple[T, ...]:
    """A name listed twice in a run would schedule the same jobs twice; it is a typo, refused."""
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"listed more than once: {', '.join(repeated)}")
    return values


NonEmptyUnique = Annotated[tuple[T, ...], Field(min_length=1), AfterValidator(_unique)]
"""A run's models, tasks or modes: an empty list would run nothing, so it is an error, not a no-op."""

TaskSelection = Annotated[
    Annotated[Literal["all"], Tag("all")] | Annotated[NonEmptyUnique[str], Tag("list")],
    Discriminator(lambda value: "all" if isinstance(value, str) else "list"),
]
"""``all`` or a list of task names; tagged so an error names ``tasks.all`` or ``tasks.list``."""

DataSource = Annotated[HubSource | MirrorSource | LocalSource | FixtureSource, Field(discriminator="kind")]


PositiveInt = Annotated[StrictInt, Field(ge=1)]

MAX_BATCH_SIZE = 1024
"""Above the largest task (600 samples): a larger batch holds the whole task, as this one does."""
MAX_REPEATS = 100
"""Each repeat answers every sample of the audited tasks once per batch size: 100 of the 29 tasks is
days of GPU time, and the flip rates settle after a handful."""
MAX_RESAMPLES = 100_000
"""20 times the default: an interval's ends no longer move, and one task of 600 samples already draws an
index array of 480 MB per side."""


class BatchAuditPlan(Spec):
    """A batch-invariance audit the run carries out (``milebench audit batch``): one job, one table."""

    model: str
    tasks: TaskSelection = Field(default="all", description="all: the run's tasks of the mode.")
    mode: Mode = Mode.MULTI_IMAGE
    variant: str | None = Field(default=None, description="Execution variant; null: the run's for the model.")
    batch_sizes: NonEmptyUnique[Annotated[PositiveInt, Field(le=MAX_BATCH_SIZE)]] = (1, 4)
    repeats: PositiveInt = Field(default=2, le=MAX_REPEATS)
    tie_margin: Number = Field(
        default=0.05, ge=0, description="Near-tie below this top-1/top-2 margin (nats)."
    )
    scorer: str = "paper"
    seed: StrictInt = 0


class DriftAuditPlan(Spec):
    """A drift audit (``milebench audit drift``): this run's ``model_a`` against ``model_b`` of ``run_b``,
    the same model in another environment (a second model spec, or another run's variant or image)."""

    model_a: str
    model_b: str | None = Field(default=None, description="Defaults to model_a.")
    run_b: str | None = Field(
        default=None, description="Another run whose scores side B reads; null: this run."
    )
    mode: Mode = Mode.MULTI_IMAGE
    scorer: str = "paper"
    resamples: PositiveInt = Field(default=5000, le=MAX_RESAMPLES)
    seed: StrictInt = 0


class AuditPlan(Spec):
    """The audits whose tables the run's report carries (target ``audit`` builds them alone)."""

    batch: tuple[BatchAuditPlan, ...] = ()
    drift: tuple[DriftAuditPlan, ...] = ()


class RunSpec(Spec):
    name: str = Field(pattern=RUN_NAME)
    benchmark: Literal["milebench"] = Field(
        default="milebench",
        exclude=True,
        description="The benchmark the run belongs to (milebench.benchmarks); it picks the Snakemake rules. "
        "Left out of the spec's content hash: it changes no result.",
    )
    description: str
    models: NonEmptyUnique[str]
    tasks: TaskSelection = "all"
    modes: NonEmptyUnique[Mode] = (Mode.MULTI_IMAGE,)
    data: DataSource
    output_dir: str | None = Field(default=None, description="Defaults to results/<name>.")
    allow_incomplete: StrictBool = Field(
        default=False, description="Build final tables from incomplete predictions, with coverage shown."
    )
    tolerance: Number = tolerance_field()
    truncation: TruncationMode = Field(
        default=TruncationMode.PAPER, description="How prompts are cut to each model's context length."
    )
    context_overflow: ContextOverflow = Field(
        default=DEFAULT_POLICY.context_overflow,
        description="generate: answer inputs past the model's window and record by how much (as the "
        "official code, paper); refuse: fail them as context_overflow without a call (strict variant).",
    )
    combined_pictures: StrictInt = Field(
        default=1, ge=1, description="Pictures each sample's images are tiled into in combined-image mode."
    )
    combined_source: CombinedSource = Field(
        default=CombinedSource.UPSTREAM,
        description="Pre-made combined_1_images (as the paper) or the kit's tiler; more than one picture "
        "always uses the kit's tiler.",
    )
    skip_bad_samples: StrictBool = Field(
        default=False,
        description="Skip (and record) samples with bad input instead of failing the preprocess job.",
    )
    max_image_pixels: StrictInt = Field(
        default=MAX_IMAGE_PIXELS,
        ge=1,
        le=MAX_IMAGE_PIXELS,
        description="Images whose header declares more pixels (width x height) are bad samples, refused "
        "before decoding; at most Pillow's own limit, so no accepted image makes Pillow warn.",
    )
    execution: dict[str, str] = Field(
        default_factory=dict,
        description="Model name -> execution variant to run it with: 'paper' (its own choices) or a name "
        "of its execution.variants; models not named run their own choices.",
    )
    limit: PositiveInt | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="At most this many samples per task and mode, the same ones every time (stratified "
        "by image quantity level; milebench.benchmarks.milebench.preprocess.subset): a subset, marked so in "
        "the report, with no verdict against the paper, which needs every sample. null: every sample. Left "
        "out of dumps when null, so the runs written before it keep their hashes.",
    )
    max_failure_rate: Number = Field(
        default=DEFAULT_POLICY.max_failure_rate,
        ge=0,
        le=1,
        description="An inference job whose share of failed samples exceeds this exits non-zero.",
    )

    runtime: Deployment | None = Field(
        default=None,
        exclude=True,
        description="Moved: where jobs run is the workflow's `--config deployment=...`, not the run spec's. "
        "Read only so the specs of archived bundles still load; planning a run that sets it is refused.",
    )
    docker_jobs: DockerJobs | None = Field(
        default=None, exclude=True, description="Moved to `--config docker_jobs=...`, as runtime."
    )
    image_registry: str | None = Field(
        default=None,
        exclude=True,
        pattern=IMAGE_REGISTRY,
        description="Moved to `--config image_registry=...`, as runtime.",
    )

    audit: AuditPlan | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Determinism and drift audits whose tables the report carries. Left out of dumps when "
        "unset, so the runs written before it keep their hashes.",
    )

    @property
    def out(self) -> str:
        return self.output_dir or f"results/{self.name}"


def has_verdict(run: RunSpec) -> bool:
    """Whether the run is judged against the paper: it has multi-image scores over every sample (a
    subset's numbers cannot be held to the published ones)."""
    return Mode.MULTI_IMAGE in run.modes and run.limit is None
