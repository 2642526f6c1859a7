"""``milebench render-input``: what one prepared sample looks like to the model, for auditing.

For an API model it prints the request JSON it posts, each image's data elided (the key is never shown).

It prints the execution the model runs with, the exact text it receives (turn format applied, image
tokens in place, after the regime's truncation), the input's token count, and per picture the
preprocessing: original size, padding colour, padded size and the pixel tensor's size. Only the
processor is loaded, never the weights, so a hub model needs its processor files and nothing more.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple, cast

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.records import PreparedSample, preprocess_command, read_prepared
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import Mode, RunSpec
from milebench.infer.adapter import AdapterError
from milebench.infer.api.base import ApiAdapter
from milebench.infer.input_view import InputAdapter, InputView, ShowsInput
from milebench.infer.registry import adapter_class
from milebench.record_files import RecordError
from milebench.spec.execution import Execution
from milebench.spec.model import ApiModel

log = logging.getLogger(__name__)


class Located(NamedTuple):
    sample: PreparedSample
    where: str
    """Task, mode, id and the prepared file (with its regime) it was read from."""


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


def prepared_sample(specs: Specs, run: RunSpec, model: str, task: str, mode: Mode, sample_id: int) -> Located:
    """The prepared sample ``sample_id`` that ``model`` reads, and where it was read from."""
    regime = model_regime(specs, run, model, mode)
    prepared = RunPaths.for_run(run).prepared(task, mode, regime.id)
    samples = {
        s.sample_id: s for s in read_prepared(prepared, preprocess_command(run.name, task, mode, regime.id))
    }
    if sample_id not in samples:
        known = f"ids {min(samples)}..{max(samples)}" if samples else "no samples"
        raise RecordError(f"{prepared}: no sample {sample_id} ({known})")
    return Located(samples[sample_id], f"{task} {mode} {sample_id}, from {prepared} (regime {regime.id})")


def render_request(args: argparse.Namespace, cls: type[ApiAdapter]) -> int:
    """An API model's input: the request JSON it would post, images elided, and where the key goes."""
    from milebench.benchmarks.milebench.spec.registry import load_specs

    specs = load_specs(args.specs)
    run = specs.run(args.run)
    paths = RunPaths.for_run(run)
    spec = specs.loaded_model(run, args.model)
    task = specs.task(args.task)
    try:
        found = prepared_sample(specs, run, spec.name, task.name, Mode(args.mode), args.sample)
        adapter = cls(spec, paths, paths.data_root, with_key=False)
        request = adapter.shown_request(found.sample)
    except (RecordError, AdapterError) as err:
        log.error("%s", err)
        return 1
    keyless = isinstance(spec.weights, ApiModel) and spec.weights.keyless
    lines = [
        f"model: {spec.name} ({spec.adapter})",
        f"sample: {found.where}",
        f"POST {request['url']}",
        "key: none (keyless)" if keyless else f"key: {cls.key_env}, in the request's headers (not shown)",
        "----- request body -----",
        json.dumps(request["body"], indent=2, ensure_ascii=False),
        "----- end of request body -----",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def render_input(args: argparse.Namespace) -> int:
    from milebench.benchmarks.milebench.spec.registry import load_specs

    specs = load_specs(args.specs)
    run = specs.run(args.run)
    paths = RunPaths.for_run(run)
    spec = specs.loaded_model(run, args.model)
    task = specs.task(args.task)
    mode = Mode(args.mode)
    cls = adapter_class(spec)
    if issubclass(cls, ApiAdapter):
        return render_request(args, cls)
    if not issubclass(cls, ShowsInput):
        log.error(
            "model spec %r: render-input shows the input of adapters that run local weights; adapter %s "
            "builds its own",
            spec.name,
            spec.adapter,
        )
        return 1
    try:
        found = prepared_sample(specs, run, spec.name, task.name, mode, args.sample)
        build = cast(Callable[..., InputAdapter], cls)  # the adapters that show input take with_model
        adapter = build(spec, paths, paths.data_root, with_model=False)
        sample = found.sample
        lines = [
            f"model: {spec.name} ({spec.adapter})",
            *execution_lines(adapter.execution),
            f"here: {adapter.device.type}"
            + ("" if adapter.device.type == "cuda" else " (float32, no autocast)"),
            f"sample: {found.where}",
            *view(adapter.input_view(sample), sample.images),
        ]
    except (RecordError, AdapterError) as err:
        log.error("%s", err)
        return 1
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
