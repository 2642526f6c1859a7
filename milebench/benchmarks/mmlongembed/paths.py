"""Where the MMLongEmbed stages read and write, for one run (the Snakefile and the CLI both use it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.mmlongembed.records import CANDIDATES, IMAGES, POOLS, QRELS, QUERIES
from milebench.benchmarks.mmlongembed.spec import EmbedRunSpec

EVIDENCE = "evidence.jsonl"
"""A real-task set's extra file: per candidate, its source query, construction and evidence segments."""


@dataclass(frozen=True)
class EmbedPaths:
    """Output layout of a run, rooted at ``base``: the working folder, or the copy a Snakemake storage
    provider stages a job's files in (``--root``), as MileBench's ``RunPaths``."""

    out: Path
    reports: Path

    @classmethod
    def for_run(cls, run: EmbedRunSpec, base: Path = Path(".")) -> EmbedPaths:
        return cls(out=base / run.out, reports=base / "reports" / run.name)

    @property
    def vg(self) -> Path:
        """The generated Visual Grounding set (see ``records`` for its files)."""
        return self.out / "vg"

    @property
    def vg_files(self) -> list[Path]:
        return [self.vg / name for name in (QUERIES, CANDIDATES, POOLS, QRELS)]

    @property
    def vg_images(self) -> Path:
        """The set's pictures (needles and haystack images), by content hash; candidates name them."""
        return self.vg / IMAGES

    @property
    def vg_manifest(self) -> Path:
        """Written last by the generator: counts, the spec's hash and the counting tokenizer."""
        return self.vg / "manifest.json"

    def task_set(self, dataset: str) -> Path:
        """One real-task dataset's set: the four files of ``records``, ``evidence.jsonl``, images."""
        return self.out / "tasks" / dataset

    def task_files(self, dataset: str) -> list[Path]:
        return [self.task_set(dataset) / name for name in (QUERIES, CANDIDATES, POOLS, QRELS, EVIDENCE)]

    def task_manifest(self, dataset: str) -> Path:
        """Written last by ``embed-pools``: counts, C/Q, the spec's hash and the input file's hash."""
        return self.task_set(dataset) / "manifest.json"

    def cache(self, model: str) -> Path:
        """Embeddings by content hash, appended as batches finish; outside Snakemake's outputs, so a
        failed or re-run job encodes nothing twice."""
        return self.out / "cache" / f"{model}.jsonl"

    def scores(self, model: str) -> Path:
        """Per query: each pool candidate's similarity."""
        return self.out / "runs" / f"{model}.jsonl"

    def inputs(self, model: str) -> Path:
        """Per candidate: what the model read (realised length, whether the needle survived)."""
        return self.out / "runs" / f"{model}.inputs.jsonl"

    def metrics(self, model: str) -> Path:
        return self.out / "metrics" / f"{model}.json"

    def logs(self, rule: str, name: str) -> Path:
        return self.out / "logs" / rule / f"{name}.log"

    def benchmark(self, rule: str, name: str) -> Path:
        return self.out / "benchmarks" / rule / f"{name}.tsv"

    @property
    def report_html(self) -> Path:
        return self.reports / "report.html"

    @property
    def report_tex(self) -> Path:
        return self.reports / "report.tex"

    @property
    def report_figures(self) -> Path:
        return self.reports / "figures"
