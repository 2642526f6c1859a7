"""Which inference cells ``verify`` re-runs, whether it can, and how their answers compare.

A cell is re-run in its model's archived family image with the archived weights. Deterministic models
(the kit's baselines and tiny models) must answer exactly as archived; for any other model the share of
samples answered identically is reported per cell. A cell that cannot run offline from the bundle (an API
model, weights or data left out of it) is listed with the reason, never counted as agreeing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from milebench.benchmarks.milebench.archive.badges import Role
from milebench.benchmarks.milebench.archive.compare import agreement, compare_rows
from milebench.benchmarks.milebench.archive.contents import RUN_ROOT
from milebench.benchmarks.milebench.archive.manifest import BundleError, Manifest, cell_names
from milebench.benchmarks.milebench.archive.workspace import Workspace
from milebench.benchmarks.milebench.plan import Cell
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.spec.model import ApiModel, BuiltinModel, HubWeights, ModelSpec, TinyWeights
from milebench.spec.model_execution import for_run

ANSWER = ("response", "failure")
"""What a re-run answer must reproduce (times and token counts are the machine's)."""


@dataclass(frozen=True)
class Planned:
    cell: Cell
    model: ModelSpec
    skip: str | None
    """Why the cell cannot be re-run from the bundle; None when it can."""

    @property
    def deterministic(self) -> bool:
        return isinstance(self.model.weights, BuiltinModel | TinyWeights)

    @property
    def name(self) -> str:
        return f"{self.cell.model}/{self.cell.mode}/{self.cell.task}"


def archived_cells(manifest: Manifest) -> list[Cell]:
    """Every cell with archived predictions: ``<out>/predictions/<model>/<mode>/<task>.jsonl``."""
    found = []
    for e in manifest.files:
        if e.role is Role.PREDICTION:
            model, mode, task = cell_names(e.path)  # the manifest was validated: these are names
            found.append(Cell(model, task, Mode(mode)))
    return sorted(found)


def parse_cell(text: str) -> Cell:
    parts = text.split("/")
    if len(parts) != 3 or parts[1] not in {m.value for m in Mode}:
        raise BundleError(f"--rerun {text}: not MODEL/MODE/TASK (e.g. random/multi-image/ActionSequence)")
    return Cell(parts[0], parts[2], Mode(parts[1]))


def choose(manifest: Manifest, chosen: list[str], per_model: int, seed: int) -> list[Cell]:
    """The cells named, else ``per_model`` cells of each model drawn with ``seed``."""
    cells = archived_cells(manifest)
    if chosen:
        named = [parse_cell(c) for c in chosen]
        unknown = [f"{c.model}/{c.mode}/{c.task}" for c in named if c not in cells]
        if unknown:
            raise BundleError(f"--rerun {', '.join(unknown)}: no archived predictions for that cell")
        return named
    rng = random.Random(seed)
    picked = []
    for model in sorted({c.model for c in cells}):
        own = [c for c in cells if c.model == model]
        picked += sorted(rng.sample(own, min(per_model, len(own))))
    return picked


def plan(ws: Workspace, specs: Specs, cells: list[Cell]) -> list[Planned]:
    has = {e.role for e in ws.manifest.files}
    run = specs.run(ws.manifest.run)
    planned = []
    for cell in cells:
        model = for_run(specs.model(cell.model), run)  # in the image of the variant the run selected
        skip = None
        if isinstance(model.weights, ApiModel):
            skip = "an API model needs the network"
        elif model.container is None:
            skip = "the model has no container image"
        elif isinstance(model.weights, HubWeights | TinyWeights) and not ws.manifest.with_weights:
            skip = "its weights are not in the bundle (archive with --with-weights)"
        elif not isinstance(model.weights, BuiltinModel | HubWeights | TinyWeights):
            skip = f"{model.weights.kind} weights cannot be bundled"
        elif not model.builtin and Role.DATA_ARCHIVE not in has:
            skip = "its input images are not in the bundle (archive with --with-data)"
        planned.append(Planned(cell, model, skip))
    return planned


def prediction_path(ws: Workspace, cell: Cell) -> str:
    return f"{RUN_ROOT}/{ws.out}/predictions/{cell.model}/{cell.mode}/{cell.task}.jsonl"


def forget(ws: Workspace, cell: Cell) -> None:
    """Remove the cell's answers from the scratch copy, journal included, so infer answers afresh."""
    predictions = ws.here(prediction_path(ws, cell))
    journal = ws.scratch(RUN_ROOT, ws.out, "journal", cell.model, str(cell.mode), f"{cell.task}.jsonl")
    for path in (predictions, predictions.with_name(predictions.name + ".provenance.json"), journal):
        path.unlink(missing_ok=True)


def judge(ws: Workspace, p: Planned) -> tuple[list[str], str]:
    """(problems, evidence line) of one re-run cell."""
    path = prediction_path(ws, p.cell)
    same, total = agreement(ws.archived(path), ws.here(path), ANSWER)
    if p.deterministic:
        problems = compare_rows(p.name, ws.archived(path), ws.here(path), ("sample_id",), ANSWER)
        return problems, f"{p.name}: {same}/{total} answers identical (deterministic model)"
    rate = 100.0 * same / total if total else 0.0
    return [], f"{p.name}: {same}/{total} answers identical ({rate:.1f}% agreement)"
