"""Execution fidelity: per run model, whether each part of running it is as in the run the paper reports.

The spec's ``execution`` states the choices of that run with their source; ``execution.deviations`` names
the aspects where the kit still differs, and why; a run's execution variant differs in every aspect it
changes. Where the official code ships no worker for a model (``execution.no_official_worker``), its
other aspects are unknown against the paper's run: the cell shows what the kit runs and what it follows.
A model with no stated execution runs the kit's generic path, which nobody has matched to the paper's
run: its aspects are unknown. API models, baselines and kit models have nothing to match, and an
unported model does not run at all. The context budget is as the paper had it when each of its numbers has
a source (the paper cut every model to its own context) and was applied in every mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.report.truncation import why_no_budget
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.spec.adapters import UNPORTED
from milebench.spec.context import REQUIRED_FIELDS, SourceKind
from milebench.spec.execution import ASPECT_FIELDS, PAPER, Aspect, Backend, Execution, ImageSequence
from milebench.spec.model import ApiModel, ModelSpec, Section
from milebench.spec.model_execution import execution_of, for_run

ASPECT_LABELS: dict[Aspect, str] = {
    Aspect.PROMPT: "Prompt template",
    Aspect.IMAGES: "Image preprocessing",
    Aspect.TOKENIZATION: "Tokenization",
    Aspect.DECODING: "Decoding loop",
    Aspect.PRECISION: "Precision",
    Aspect.STOP: "Stop strings",
    Aspect.TOKENIZER: "Tokenizer",
}
BUDGET, BUDGET_LABEL = "budget", "Context budget"


class Fidelity(StrEnum):
    AS_OFFICIAL = "as official"
    DIFFERS = "differs"
    UNKNOWN = "unknown"
    NOT_APPLICABLE = "not applicable"
    NOT_PORTED = "not ported"


@dataclass(frozen=True)
class FidelityCell:
    status: Fidelity
    text: str
    """The choice as run (as official), or why it differs, is unknown or does not apply."""

    @property
    def css(self) -> str:
        return self.status.value.replace(" ", "-")


@dataclass(frozen=True)
class Column:
    key: str
    label: str


@dataclass(frozen=True)
class FidelityRow:
    model: str
    display_name: str
    execution: str
    """``paper`` or the run's execution variant."""
    cells: tuple[tuple[Column, FidelityCell], ...]
    """Each column of :data:`COLUMNS` with its cell."""
    source: str | None
    """Where the stated execution comes from."""


UNPUBLISHED: dict[Section, str] = {
    Section.KIT: "a kit model: no published run to match",
    Section.USER: "your model: no published run to match",
}
"""The sections of models the paper never ran, and why no fidelity applies to them."""

COLUMNS: tuple[Column, ...] = (
    *(Column(a.value, label) for a, label in ASPECT_LABELS.items()),
    Column(BUDGET, BUDGET_LABEL),
)
"""The fidelity table's columns, in order."""


def shown(execution: Execution, aspect: Aspect) -> str:
    """The aspect's choices as the table prints them."""
    values = []
    for name in ASPECT_FIELDS[aspect]:
        value = getattr(execution, name)
        if isinstance(value, tuple):
            values.append(", ".join(repr(v) for v in value) or "none")
        elif name == "backend":
            if value is not Backend.TRANSFORMERS:
                values.append(f"backend {value}")
        elif name == "image_sequence":
            if value is not ImageSequence.IMAGES:
                values.append(f"pictures as {value.replace('_', ' ')}")
        elif isinstance(value, bool):
            if value:
                values.append(name.replace("_", " "))
        else:
            values.append(f"{name.replace('_', ' ')} {value}" if name == "autocast" else str(value))
    return "; ".join(values) or "the checkpoint's"


def aspect_cell(paper: Execution, applied: Execution, aspect: Aspect) -> FidelityCell:
    changed = any(getattr(paper, f) != getattr(applied, f) for f in ASPECT_FIELDS[aspect])
    if changed:
        description = paper.variants[applied.label].description
        return FidelityCell(
            Fidelity.DIFFERS, f"variant {applied.label!r} runs {shown(applied, aspect)}: {description}"
        )
    if aspect in applied.deviations:
        return FidelityCell(Fidelity.DIFFERS, applied.deviations[aspect])
    if applied.no_official_worker:
        return FidelityCell(Fidelity.UNKNOWN, f"{shown(applied, aspect)}; {applied.no_official_worker}")
    return FidelityCell(Fidelity.AS_OFFICIAL, shown(applied, aspect))


def execution_cells(spec: ModelSpec, run: RunSpec) -> dict[str, FidelityCell]:
    """One cell per aspect: compared with the paper's run where the spec states it."""

    def every(status: Fidelity, text: str) -> dict[str, FidelityCell]:
        return {a.value: FidelityCell(status, text) for a in Aspect}

    if spec.adapter == UNPORTED:
        return every(Fidelity.NOT_PORTED, "not run: the model needs its original code base")
    if isinstance(spec.weights, ApiModel):
        return every(Fidelity.NOT_APPLICABLE, "the provider runs the model")
    if spec.builtin:
        return every(Fidelity.NOT_APPLICABLE, "a baseline the kit answers itself")
    if spec.section in UNPUBLISHED:
        return every(Fidelity.NOT_APPLICABLE, UNPUBLISHED[spec.section])
    applied = execution_of(for_run(spec, run))
    if spec.execution is None or applied is None:
        why = "no stated execution of the paper's run; the kit runs "
        return {
            a.value: FidelityCell(
                Fidelity.UNKNOWN, why + (shown(applied, a) if applied else "the checkpoint's own code")
            )
            for a in Aspect
        }
    return {a.value: aspect_cell(spec.execution, applied, a) for a in Aspect}


def budget_cell(specs: Specs, run: RunSpec, spec: ModelSpec) -> FidelityCell:
    """As official when every required number has a source and a budget cut the prompts in every mode."""
    if spec.adapter == UNPORTED:
        return FidelityCell(Fidelity.NOT_PORTED, "not run")
    if spec.builtin:
        return FidelityCell(Fidelity.NOT_APPLICABLE, "a baseline reads no context")
    if spec.section in UNPUBLISHED:
        return FidelityCell(Fidelity.NOT_APPLICABLE, UNPUBLISHED[spec.section])
    sources = {name: getattr(spec.context_sources, name) for name in REQUIRED_FIELDS}
    unknown = [name for name, source in sources.items() if source is None or source.kind is SourceKind.NONE]
    if unknown:
        return FidelityCell(Fidelity.UNKNOWN, f"no source for {' and '.join(unknown)}; see the budget table")
    skipped = {
        mode.value: why
        for mode in run.modes
        if (why := why_no_budget(spec, model_regime(specs, run, spec.name, mode), mode)) is not None
    }
    if skipped:
        reasons = "; ".join(f"{mode}: {why}" for mode, why in skipped.items())
        return FidelityCell(Fidelity.DIFFERS, f"no budget applied ({reasons})")
    kinds = sorted({source.kind.value for source in sources.values() if source is not None})
    return FidelityCell(
        Fidelity.AS_OFFICIAL,
        f"{spec.max_context_len} tokens, {spec.n_tokens_per_image} per image ({', '.join(kinds)})",
    )


def fidelity_rows(specs: Specs, run: RunSpec) -> list[FidelityRow]:
    """Every run model's fidelity to the paper's run, aspect by aspect."""
    rows = []
    for name in run.models:
        spec = specs.models[name]
        cells = {**execution_cells(spec, run), BUDGET: budget_cell(specs, run, spec)}
        rows.append(
            FidelityRow(
                model=name,
                display_name=spec.display_name,
                execution=run.execution.get(name, PAPER),
                cells=tuple((column, cells[column.key]) for column in COLUMNS),
                source=spec.execution.source if spec.execution else None,
            )
        )
    return rows


def telling(rows: list[FidelityRow]) -> list[FidelityRow]:
    """The rows, or none where every cell is "not applicable" (baselines, kit and API models alone): a
    grid with nothing to say is left out of the report."""
    if all(cell.status is Fidelity.NOT_APPLICABLE for row in rows for _, cell in row.cells):
        return []
    return rows
