"""Where the MMLongEmbed stages read and write, for one run (the Snakefile and the CLI both use it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.mmlongembed.records import CANDIDATES, IMAGES, POOLS, QRELS, QUERIES
from milebench.paths import RunFolder

EVIDENCE = "evidence.jsonl"
"""A real-task set's extra file: per candidate, its source query, construction and evidence segments."""


@dataclass(frozen=True)
class EmbedPaths(RunFolder):
    """MMLongEmbed's output layout of a run, in the run folder every benchmark has."""

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

    @property
    def analysis(self) -> Path:
        """Every analysis of the run and its verdict against the paper (``embed-aggregate``)."""
        return self.out / "analysis.json"
