"""RunSpec: which models x tasks x modes to run, on which data, and where outputs land."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from milebench.spec.base import Spec


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
    seed: int = 0
    samples_per_task: int = Field(default=3, ge=1)


class TruncationMode(StrEnum):
    """How a prompt is cut to a model's context: ``paper`` follows the official code (text decoded back
    from token ids), ``clean`` cuts the original text at token offsets so kept text stays exact."""

    PAPER = "paper"
    CLEAN = "clean"


class CombinedSource(StrEnum):
    """Where combined-image pictures come from: the data's pre-made ``combined_1_images`` or the kit."""

    UPSTREAM = "upstream"
    KIT = "kit"


class Runtime(StrEnum):
    """Where inference jobs run: the host's Python, the model family's Docker image (Docker SDK), or
    Snakemake's own container support (Apptainer, images pulled from ``image_registry``; HPC)."""

    LOCAL = "local"
    DOCKER = "docker"
    APPTAINER = "apptainer"


DataSource = Annotated[HubSource | MirrorSource | LocalSource | FixtureSource, Field(discriminator="kind")]


class RunSpec(Spec):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    description: str
    models: tuple[str, ...] = Field(min_length=1)
    tasks: Literal["all"] | tuple[str, ...] = "all"
    modes: tuple[Mode, ...] = (Mode.MULTI_IMAGE,)
    data: DataSource
    output_dir: str | None = Field(default=None, description="Defaults to results/<name>.")
    allow_incomplete: bool = Field(
        default=False, description="Build final tables from incomplete predictions, with coverage shown."
    )
    tolerance: float = Field(default=1.0, ge=0, description="Verdict tolerance in table points (x100).")
    truncation: TruncationMode = Field(
        default=TruncationMode.PAPER, description="How prompts are cut to each model's context length."
    )
    combined_pictures: int = Field(
        default=1, ge=1, description="Pictures each sample's images are tiled into in combined-image mode."
    )
    combined_source: CombinedSource = Field(
        default=CombinedSource.UPSTREAM,
        description="Pre-made combined_1_images (as the paper) or the kit's tiler; more than one picture "
        "always uses the kit's tiler.",
    )
    skip_bad_samples: bool = Field(
        default=False,
        description="Skip (and record) samples with bad input instead of failing the preprocess job.",
    )
    execution: dict[str, str] = Field(
        default_factory=dict,
        description="Model name -> execution variant to run it with: 'paper' (its own choices) or a name "
        "of its execution.variants; models not named run their own choices.",
    )
    max_failure_rate: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="An inference job whose share of failed samples exceeds this exits non-zero.",
    )

    runtime: Runtime = Field(
        default=Runtime.LOCAL,
        description="local: the host's Python; docker: each model family's image via the Docker engine; "
        "apptainer: Snakemake's container support (run with --software-deployment-method apptainer).",
    )
    image_registry: str | None = Field(
        default=None,
        pattern=r"^(docker|oras|library|shub)://\S+[^/]$",
        description="Runtime apptainer: where the family images are pushed, as an Apptainer URI prefix "
        "(docker://ghcr.io/<org>/milebench gives docker://ghcr.io/<org>/milebench/<family>:<tag>, the tag "
        "printed by `milebench image uri`); null: local SIF files results/images/<family>.sif.",
    )

    @property
    def out(self) -> str:
        return self.output_dir or f"results/{self.name}"
