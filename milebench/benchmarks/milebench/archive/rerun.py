"""Which inference cells ``verify`` re-runs, whether it can, and how their answers compare.

A cell is re-run in its model's archived family image with the archived weights. Deterministic models
(the kit's baselines and tiny models) must answer exactly as archived; for any other model the share of
samples answered identically is reported per cell. A cell that cannot run offline from the bundle (an API
model, weights or data left out of it) is listed with the reason, never counted as agreeing.
"""

from __future__ import annotations

import random
import re
from functools import partial
from pathlib import PurePosixPath

from milebench.archive.badges import Role
from milebench.archive.compare import agreement, compare_rows
from milebench.archive.contents import PROVENANCE_SUFFIX
from milebench.archive.hooks import Rerun
from milebench.archive.manifest import RUN_ROOT, BundleError, Manifest
from milebench.archive.workspace import Workspace
from milebench.benchmarks.milebench.plan import Cell
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import TASK_NAME
from milebench.spec.model import MODEL_NAME, ApiModel, BuiltinModel, HubWeights, ModelSpec, TinyWeights
from milebench.spec.model_execution import for_run

ANSWER = ("response", "failure")
"""What a re-run answer must reproduce (times and token counts are the machine's)."""


def cell_names(path: str) -> tuple[str, str, str]:
    """(model, mode, task) of a predictions file ``.../predictions/<model>/<mode>/<task>.jsonl``."""
    *_, kind, model, mode, name = ("", "", "", *PurePosixPath(path).parts)
    task = name.removesuffix(".jsonl")
    if not (
        kind == "predictions"
        and re.fullmatch(MODEL_NAME, model)
        and mode in {m.value for m in Mode}
        and name.endswith(".jsonl")
        and re.fullmatch(TASK_NAME, task)
    ):
        raise ValueError(
            f"{path!r} is not a predictions file <out>/predictions/<model>/<mode>/<task>.jsonl named by a "
            "model, a mode and a task"
        )
    return model, mode, task


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


def skip_reason(model: ModelSpec, manifest: Manifest, has_data: bool) -> str | None:
    """Why a cell of ``model`` cannot be re-run from the bundle; None when it can."""
    if isinstance(model.weights, ApiModel):
        return "an API model needs the network"
    if model.container is None:
        return "the model has no container image"
    if isinstance(model.weights, HubWeights | TinyWeights) and not manifest.with_weights:
        return "its weights are not in the bundle (archive with --with-weights)"
    if not isinstance(model.weights, BuiltinModel | HubWeights | TinyWeights):
        return f"{model.weights.kind} weights cannot be bundled"
    if not model.builtin and not has_data:
        return "its input images are not in the bundle (archive with --with-data)"
    return None


def plan(ws: Workspace, specs: Specs, cells: list[Cell]) -> list[Rerun]:
    has_data = any(e.role is Role.DATA_ARCHIVE for e in ws.manifest.files)
    run = specs.run(ws.manifest.run)
    planned = []
    for cell in cells:
        model = for_run(specs.model(cell.model), run)  # in the image of the variant the run selected
        predictions = prediction_path(ws, cell)
        journal = f"{RUN_ROOT}/{ws.out}/journal/{cell.model}/{cell.mode}/{cell.task}.jsonl"
        deterministic = isinstance(model.weights, BuiltinModel | TinyWeights)
        planned.append(
            Rerun(
                name=f"{cell.model}/{cell.mode}/{cell.task}",
                family=str(model.container),
                skip=skip_reason(model, ws.manifest, has_data),
                command=["infer", "--model", cell.model, "--task", cell.task, "--mode", str(cell.mode)],
                forget=[predictions, predictions + PROVENANCE_SUFFIX, journal],
                fetch=not model.builtin,
                judge=partial(judge, cell=cell, deterministic=deterministic),
            )
        )
    return planned


def prediction_path(ws: Workspace, cell: Cell) -> str:
    return f"{RUN_ROOT}/{ws.out}/predictions/{cell.model}/{cell.mode}/{cell.task}.jsonl"


def judge(ws: Workspace, cell: Cell, deterministic: bool) -> tuple[list[str], str]:
    """(problems, evidence line) of one re-run cell."""
    path, name = prediction_path(ws, cell), f"{cell.model}/{cell.mode}/{cell.task}"
    same, total = agreement(ws.archived(path), ws.here(path), ANSWER)
    if deterministic:
        problems = compare_rows(name, ws.archived(path), ws.here(path), ("sample_id",), ANSWER)
        return problems, f"{name}: {same}/{total} answers identical (deterministic model)"
    rate = 100.0 * same / total if total else 0.0
    return [], f"{name}: {same}/{total} answers identical ({rate:.1f}% agreement)"
