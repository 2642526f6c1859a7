"""Load every spec of a specs folder once and check the references between them.

The default folder is the one the package ships (``milebench/specs/``); ``--specs`` names another."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from milebench.package_data import package_path
from milebench.spec.base import S, Spec, SpecError, load_spec
from milebench.spec.execution import for_run, variant_problem
from milebench.spec.model import ModelSpec
from milebench.spec.paper import PaperSpec
from milebench.spec.run import RunSpec
from milebench.spec.task import TaskSpec

DEFAULT_SPECS = package_path("milebench", "specs")


@dataclass(frozen=True)
class Specs:
    """All specs of a kit checkout, keyed by name; ``root`` resolves relative paths inside them."""

    root: Path
    tasks: dict[str, TaskSpec]
    models: dict[str, ModelSpec]
    runs: dict[str, RunSpec]
    paper: PaperSpec

    def run(self, name: str) -> RunSpec:
        if name not in self.runs:
            known = ", ".join(sorted(self.runs))
            raise SpecError(self.root / "runs", [("name", f"no run spec {name!r}; known: {known}")])
        return self.runs[name]

    def run_tasks(self, run: RunSpec) -> list[TaskSpec]:
        names = list(self.tasks) if run.tasks == "all" else list(run.tasks)
        return [self.tasks[n] for n in names]

    def run_models(self, run: RunSpec) -> list[ModelSpec]:
        """The run's models as it runs them: with the execution variant it selects for each."""
        return [for_run(self.models[n], run) for n in run.models]


def spec_hash(spec: Spec, exclude: frozenset[str] = frozenset()) -> str:
    """Content hash of a validated spec: a formatting-only edit of its YAML leaves it unchanged.

    ``exclude`` leaves top-level fields out, so adding a field that cannot matter keeps old hashes."""
    payload = json.dumps(
        spec.model_dump(mode="json", exclude=set(exclude)), sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _load_folder(folder: Path, model: type[S]) -> dict[str, tuple[Path, S]]:
    loaded: dict[str, tuple[Path, S]] = {}
    for path in sorted(folder.glob("*.yaml")):
        spec = load_spec(path, model)
        name = spec.name  # type: ignore[attr-defined]
        if name != path.stem:
            raise SpecError(path, [("name", f"{name!r} must equal the file name {path.stem!r}")])
        loaded[name] = (path, spec)
    if not loaded:
        raise SpecError(folder, [("<folder>", "no *.yaml spec files")])
    return loaded


def _paper_models(paper: PaperSpec) -> list[tuple[str, str]]:
    """(field path, model name) for every place the paper spec names a model spec."""
    table = paper.main_table
    return [
        *((f"main_table.rows.{i}.model", row.model) for i, row in enumerate(table.rows)),
        *((f"main_table.footnotes.{name}", name) for name in table.footnotes),
        *((f"main_table.inconsistencies.{i}.model", x.model) for i, x in enumerate(table.inconsistencies)),
        *((f"contamination.rows.{i}.model", row.model) for i, row in enumerate(paper.contamination.rows)),
        *((f"image_quantity.rows.{i}.model", row.model) for i, row in enumerate(paper.image_quantity.rows)),
    ]


def load_specs(root: Path = DEFAULT_SPECS) -> Specs:
    """Load and cross-check tasks, models, runs and the paper spec under ``root``."""
    root = Path(root)
    if not root.is_dir():
        raise SpecError(root, [("<folder>", "no such specs folder")])
    tasks = _load_folder(root / "tasks", TaskSpec)
    models = _load_folder(root / "models", ModelSpec)
    runs = _load_folder(root / "runs", RunSpec)
    paper_path = root / "paper.yaml"
    paper = load_spec(paper_path, PaperSpec)

    for path, run in runs.values():
        problems = [
            (f"models.{i}", f"unknown model {m!r}") for i, m in enumerate(run.models) if m not in models
        ]
        for model, variant in run.execution.items():
            problem = (
                f"model {model!r} is not in this run"
                if model not in run.models or model not in models
                else variant_problem(models[model][1], variant)
            )
            if problem:
                problems.append((f"execution.{model}", problem))
        if run.tasks != "all":
            problems += [
                (f"tasks.{i}", f"unknown task {t!r}") for i, t in enumerate(run.tasks) if t not in tasks
            ]
        if problems:
            raise SpecError(path, problems)
    bad_refs = [
        (field, f"unknown model {name!r}") for field, name in _paper_models(paper) if name not in models
    ]
    if bad_refs:
        raise SpecError(paper_path, bad_refs)
    return Specs(
        root=root,
        tasks={k: v for k, (_, v) in tasks.items()},
        models={k: v for k, (_, v) in models.items()},
        runs={k: v for k, (_, v) in runs.items()},
        paper=paper,
    )
