"""Where every stage of a MileBench run reads and writes: the single source of its output paths."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from milebench.benchmarks.milebench.spec.run import Mode
from milebench.paths import RunFolder

EXTRACT_MARKERS = ".extracted"
"""Folder beside the extracted tree: one marker per archive extracted into it."""
UNLIMITED_REGIME = "full"
"""The input regime without a token budget and with interleaved images (builtin baselines, unknown
context settings); every other regime id carries a hash of its settings."""


PROVENANCE_TEX = "report-provenance.tex"
"""The report's provenance in full, a LaTeX document of its own beside ``report.tex``."""


@dataclass(frozen=True)
class RunPaths(RunFolder):
    """MileBench's output layout of a run; the Snakefile and the CLI both derive paths from here."""

    @property
    def mirror(self) -> Path:
        """Generated fixture archives and their lock (fixture data sources only)."""
        return self.out / "mirror"

    @property
    def downloads(self) -> Path:
        return self.out / "downloads"

    @property
    def data_root(self) -> Path:
        """The extracted ``MileBench/`` tree."""
        return self.out / "data" / "MileBench"

    @property
    def extract_markers(self) -> Path:
        """One marker per archive extracted into ``data_root``; written by fetch beside the tree."""
        return self.data_root.parent / EXTRACT_MARKERS

    @property
    def fetch_manifest(self) -> Path:
        """Written last by fetch: its presence means the data is verified and extracted."""
        return self.out / "data" / "fetch.json"

    def model_dir(self, model: str) -> Path:
        """Locally built checkpoints (tiny models)."""
        return self.out / "models" / model

    def prepared(self, task: str, mode: Mode | str, regime: str = UNLIMITED_REGIME) -> Path:
        """Prepared samples of one input regime (context settings, tokenizer, truncation, image input)."""
        return self.out / "prepared" / str(mode) / regime / f"{task}.jsonl"

    def prepared_manifest(self, task: str, mode: Mode | str, regime: str = UNLIMITED_REGIME) -> Path:
        """Beside the prepared samples: the regime, the source data's hash and every skipped sample."""
        return self.out / "prepared" / str(mode) / regime / f"{task}.manifest.json"

    def tiles(self, task: str, mode: Mode | str, regime: str = UNLIMITED_REGIME) -> Path:
        """Combined-image pictures the kit's tiler made for one prepared file (named by the content hash of
        their inputs), beside which its samples name them; empty where the mode tiles none."""
        return self.out / "tiles" / str(mode) / regime / task

    def predictions(self, model: str, task: str, mode: Mode | str) -> Path:
        return self.out / "predictions" / model / str(mode) / f"{task}.jsonl"

    def journal(self, model: str, task: str, mode: Mode | str) -> Path:
        """Answers as they finish; outside Snakemake's outputs, so a failed or re-run job keeps them."""
        return self.out / "journal" / model / str(mode) / f"{task}.jsonl"

    def judgments(self, model: str, task: str, mode: Mode | str) -> Path:
        return self.out / "scores" / model / str(mode) / f"{task}.jsonl"

    def samples(self, model: str, task: str, mode: Mode | str) -> Path:
        """The cell's samples joined (prompt, images, answer, gold, judgment): ``milebench show`` reads it."""
        return self.out / "samples" / model / str(mode) / f"{task}.jsonl"

    def task_score(self, model: str, task: str, mode: Mode | str) -> Path:
        return self.out / "scores" / model / str(mode) / f"{task}.json"

    def infer_provenance(self, model: str, task: str, mode: Mode | str) -> Path:
        """Beside the predictions: the environment, specs, data and times of the job that wrote them."""
        return self.out / "predictions" / model / str(mode) / f"{task}.jsonl.provenance.json"

    def score_provenance(self, model: str, task: str, mode: Mode | str) -> Path:
        """Beside the task score: the manifest of the score job."""
        return self.out / "scores" / model / str(mode) / f"{task}.json.provenance.json"

    @property
    def aggregate_json(self) -> Path:
        """Every model's task, group and overall scores with intervals and coverage."""
        return self.out / "aggregate.json"

    @property
    def verdict_json(self) -> Path:
        """The run's scores against the paper's main table."""
        return self.out / "verdict.json"

    @property
    def report_provenance_tex(self) -> Path:
        """The LaTeX of the provenance in full (every package, job and data manifest), a document of its
        own so the report stays the length of its tables."""
        return self.reports / PROVENANCE_TEX

    def audit(self, name: str) -> Path:
        """An audit's JSON (``milebench.benchmarks.milebench.audit.plan`` names it), its Markdown tables
        beside it."""
        return self.reports / "audit" / name
