"""What a benchmark contributes to the artifact bundles of its runs, declared as ``bundles:`` in its
:class:`~milebench.spec.benchmark.Benchmark`: which files of a run go in (and what each is), what its
job records say of the kit commit, image and times, which names its manifest may hold, the commands that
re-score and re-render a run, and the inference cells ``verify`` can re-run.

The core does the rest the same way for every benchmark: the manifest, the source, the images and their
SBOMs, the RO-Crate, the hash and image checks, the comparisons and the evaluator's summary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from milebench.archive.badges import Role
from milebench.errors import KitError
from milebench.provenance import Environment, KitVersion
from milebench.spec.benchmark import benchmarks, imported

if TYPE_CHECKING:
    from milebench.archive.manifest import Manifest
    from milebench.archive.workspace import Workspace


@dataclass(frozen=True)
class Item:
    """One file to copy into the bundle."""

    source: Path
    dest: str
    role: Role
    produced_by: str


class JobRecord(Protocol):
    """What every benchmark's job record holds of its making (MileBench's and MMLongEmbed's do)."""

    @property
    def kit(self) -> KitVersion: ...

    @property
    def environment(self) -> Environment: ...

    @property
    def started_at(self) -> datetime: ...

    @property
    def finished_at(self) -> datetime: ...


@dataclass(frozen=True)
class Stamp:
    """What the bundle takes from one job's provenance record: where the kit's source and the job's image
    come from, and when the run ran."""

    path: Path
    commit: str
    dirty: bool
    image_id: str | None
    started_at: datetime
    finished_at: datetime

    @classmethod
    def of(cls, path: Path, record: JobRecord) -> Stamp:
        return cls(
            path=path,
            commit=record.kit.commit,
            dirty=bool(record.kit.dirty),
            image_id=record.environment.image_id,
            started_at=record.started_at,
            finished_at=record.finished_at,
        )


@dataclass(frozen=True)
class Options:
    with_data: bool = False
    with_weights: bool = False
    images: bool = True
    """False: no image, no SBOM (a bundle for the hash checks only; verify then fails its image checks)."""
    tarball: bool = False


@dataclass(frozen=True)
class RunContents:
    """A finished run as its benchmark hands it to the archiver."""

    items: list[Item]
    """Its results and report, and its data archives and weights when asked for (not the specs)."""
    stamps: list[Stamp]
    families: list[str]
    """The image families its jobs ran in (the kit's among them)."""
    title: str
    """The benchmark's name as people write it, for the crate."""


@dataclass(frozen=True)
class Rerun:
    """One inference cell ``verify`` may re-run, or says why it cannot."""

    name: str
    family: str
    skip: str | None
    """Why the cell cannot be re-run from the bundle; None when it can."""
    command: list[str] = field(default_factory=list)
    """The kit command (name and its options after ``--run``/``--root``) that answers it afresh."""
    forget: list[str] = field(default_factory=list)
    """Bundle paths removed from the scratch copy first, so the command answers afresh."""
    fetch: bool = False
    """It reads the run's data, which the benchmark's fetch commands unpack first."""
    judge: Callable[[Workspace], tuple[list[str], str]] | None = None
    """(problems, evidence line) after the re-run."""


class BundleHooks(Protocol):
    """A benchmark's part in archiving and verifying its runs."""

    recomputed: frozenset[str]
    """First names under the run's results folder that re-scoring writes: left out of the re-scored copy,
    so a command that writes nothing cannot pass as one that agreed."""
    rescored: Mapping[Role, tuple[str, ...] | None]
    """The roles re-scoring re-computes: JSON lines matched by these keys, or whole JSON (None)."""

    def contents(self, specs_root: Path, run: str, root: Path, options: Options) -> RunContents: ...

    def check_manifest(self, manifest: Manifest) -> None:
        """Refuse (ValueError) a manifest naming a file its benchmark reads names from that are not ones."""

    def rescore_commands(self, ws: Workspace) -> list[list[str]]:
        """Re-render the report (``ws.render_root``), re-score and re-aggregate the scratch copy."""

    def fetch_commands(self, ws: Workspace) -> list[list[str]]:
        """Unpack the bundled data a re-run cell reads."""

    def reruns(self, ws: Workspace, chosen: list[str], per_model: int, seed: int) -> list[Rerun]:
        """The cells named (``--rerun``), else ``per_model`` drawn per model with ``seed``."""


class NoBundles(KitError, RuntimeError):
    """A bundle or run of a benchmark this kit does not have, or that declares no bundles."""

    exit_status = 2


def hooks_of(benchmark: str, where: Path | str) -> BundleHooks:
    """The bundle hooks ``benchmark`` declares; ``where`` (the manifest, the run) names what asked."""
    known = benchmarks()
    if benchmark not in known:
        raise NoBundles(
            f"{where}: benchmark {benchmark!r} is not installed here; known: {', '.join(sorted(known))}"
        )
    declared = known[benchmark].bundles
    if declared is None:
        raise NoBundles(f"{where}: benchmark {benchmark!r} declares no artifact bundles")
    hooks: BundleHooks = imported(declared)
    return hooks
