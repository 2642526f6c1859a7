"""The run folder every benchmark has, and the folders a model adapter reads; each benchmark lays out its
stages' files in it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Self


class NamedRun(Protocol):
    """What a run folder is named by: any benchmark's run spec."""

    @property
    def name(self) -> str: ...

    @property
    def out(self) -> str: ...


class ModelFolders(Protocol):
    """The folders a model adapter reads: the data its samples' image paths are relative to, and where
    a locally built checkpoint lies. Any benchmark's run layout has them."""

    @property
    def data_root(self) -> Path: ...

    def model_dir(self, model: str) -> Path: ...


@dataclass(frozen=True)
class RunFolder:
    """A run's output folder and report folder, every benchmark's; each adds the files of its stages.

    Path methods take plain strings too, so the Snakefile can pass wildcard patterns like ``"{task}"``.
    ``root`` is the folder the layout is rooted at: the working folder, or the copy a Snakemake storage
    provider stages a job's files in (``--root``).
    """

    out: Path
    reports: Path
    root: Path = Path(".")

    @classmethod
    def for_run(cls, run: NamedRun, base: Path = Path(".")) -> Self:
        return cls(out=base / run.out, reports=base / "reports" / run.name, root=base)

    def relative(self, path: Path) -> Path:
        """``path`` as the layout names it, without the root this job sees it under: what records and
        reports show, so they do not depend on where a storage provider staged the job's files."""
        return (
            path
            if self.root == Path(".") or not path.is_relative_to(self.root)
            else path.relative_to(self.root)
        )

    def benchmark(self, rule: str, name: str) -> Path:
        """Snakemake's per-job record of wall time, memory and I/O."""
        return self.out / "benchmarks" / rule / f"{name}.tsv"

    def logs(self, rule: str, name: str) -> Path:
        return self.out / "logs" / rule / f"{name}.log"

    @property
    def report_html(self) -> Path:
        return self.reports / "report.html"

    @property
    def report_tex(self) -> Path:
        return self.reports / "report.tex"

    @property
    def report_figures(self) -> Path:
        """The report's figures (PDF for the LaTeX, PNG for the HTML)."""
        return self.reports / "figures"
