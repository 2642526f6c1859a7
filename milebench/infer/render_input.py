"""``milebench render-input``: what one prepared sample looks like to the model, for auditing.

It prints the execution the model runs with, the exact text it receives (turn format applied, image
tokens in place, after the regime's truncation), the input's token count, and per picture the
preprocessing: original size, padding colour, padded size and the pixel tensor's size. Only the
processor is loaded, never the weights, so a hub model needs its processor files and nothing more.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import cast

from milebench.infer.adapter import AdapterError
from milebench.infer.input_view import InputAdapter, InputView, ShowsInput
from milebench.infer.registry import adapter_class
from milebench.paths import RunPaths
from milebench.preprocess.commands import task_spec
from milebench.preprocess.regime import model_regime
from milebench.record_files import RecordError, read_prepared
from milebench.spec.execution import Execution
from milebench.spec.run import Mode
from milebench.stage_inputs import preprocess_command

log = logging.getLogger(__name__)


def execution_lines(execution: Execution) -> Iterator[str]:
    yield f"execution: {execution.label}"
    choices = execution.model_dump(
        mode="json", exclude={"variants", "applied_variant", "source", "deviations"}
    )
    for field, value in choices.items():
        yield f"  {field}: {value}"


def view(shown: InputView, images: Sequence[str]) -> Iterator[str]:
    """The lines that show an input view of a sample whose pictures are ``images``."""
    each = (
        f"; each image token stands for {shown.ids_per_image} ids" if shown.ids_per_image is not None else ""
    )
    yield f"input: {shown.tokens} tokens{each}"
    yield from (f"note: {note}" for note in shown.notes)
    yield "----- text -----"
    yield shown.text
    yield "----- end of text -----"
    pixels = shown.pixels
    per_picture = pixels is not None and pixels[0] == len(shown.steps)
    yield f"images: {len(shown.steps)}" + ("" if per_picture or pixels is None else f", pixels {pixels}")
    for i, (path, step) in enumerate(zip(images, shown.steps, strict=True)):
        padding = (
            f"padded with {step.padding} to {step.padded[0]}x{step.padded[1]}"
            if step.padding
            else "no padding"
        )
        final = f" -> pixels {pixels[1:]}" if per_picture and pixels is not None else ""
        yield f"  {i + 1}. {path}: {step.original[0]}x{step.original[1]}, {padding}{final}"


def render_input(args: argparse.Namespace) -> int:
    from milebench.spec.registry import load_specs

    specs = load_specs(args.specs)
    run = specs.run(args.run)
    paths = RunPaths.for_run(run)
    spec = specs.loaded_model(run, args.model)
    task = task_spec(specs, args.task)
    mode = Mode(args.mode)
    cls = adapter_class(spec)
    if not issubclass(cls, ShowsInput):
        log.error(
            "model spec %r: render-input shows the input of adapters that run local weights; adapter %s "
            "builds its own",
            spec.name,
            spec.adapter.value,
        )
        return 1
    regime = model_regime(specs, run, spec.name, mode)
    prepared = paths.prepared(task.name, mode, regime.id)
    made_by = preprocess_command(run.name, task.name, mode, regime.id)
    try:
        samples = {s.sample_id: s for s in read_prepared(prepared, made_by)}
        if args.sample not in samples:
            known = f"ids {min(samples)}..{max(samples)}" if samples else "no samples"
            raise RecordError(f"{prepared}: no sample {args.sample} ({known})")
        build = cast(Callable[..., InputAdapter], cls)  # the adapters that show input take with_model
        adapter = build(spec, paths, paths.data_root, with_model=False)
        sample = samples[args.sample]
        lines = [
            f"model: {spec.name} ({spec.adapter.value})",
            *execution_lines(adapter.execution),
            f"here: {adapter.device.type}"
            + ("" if adapter.device.type == "cuda" else " (float32, no autocast)"),
            f"sample: {task.name} {mode} {sample.sample_id}, from {prepared} (regime {regime.id})",
            *view(adapter.input_view(sample), sample.images),
        ]
    except (RecordError, AdapterError) as err:
        log.error("%s", err)
        return 1
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
