"""Where every stage reads and writes, for one run: the single source of output paths."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from milebench.spec.run import Mode, RunSpec


@dataclass(frozen=True)
class RunPaths:
    """Output layout of a run; the Snakefile and the CLI both derive paths from here.

    Path methods take plain strings too, so the Snakefile can pass wildcard patterns like ``"{task}"``.
    """

    out: Path
    reports: Path

    @classmethod
    def for_run(cls, run: RunSpec, base: Path = Path(".")) -> RunPaths:
        return cls(out=base / run.out, reports=base / "reports" / run.name)

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
    def fetch_manifest(self) -> Path:
        """Written last by fetch: its presence means the data is verified and extracted."""
        return self.out / "data" / "fetch.json"

    def model_dir(self, model: str) -> Path:
        """Locally built checkpoints (tiny models)."""
        return self.out / "models" / model

    def prepared(self, task: str, mode: Mode | str) -> Path:
        return self.out / "prepared" / str(mode) / f"{task}.jsonl"

    def predictions(self, model: str, task: str, mode: Mode | str) -> Path:
        return self.out / "predictions" / model / str(mode) / f"{task}.jsonl"

    def judgments(self, model: str, task: str, mode: Mode | str) -> Path:
        return self.out / "scores" / model / str(mode) / f"{task}.jsonl"

    def task_score(self, model: str, task: str, mode: Mode | str) -> Path:
        return self.out / "scores" / model / str(mode) / f"{task}.json"

    def logs(self, rule: str, name: str) -> Path:
        return self.out / "logs" / rule / f"{name}.log"

    @property
    def report_html(self) -> Path:
        return self.reports / "report.html"

    @property
    def report_tex(self) -> Path:
        return self.reports / "report.tex"
