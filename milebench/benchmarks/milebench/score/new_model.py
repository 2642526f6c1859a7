"""``import-official --new-model``: import predictions of a model the kit does not know, under a new name.

The model gets a spec of its own (section ``user``, ``adapter: unported``: the kit never runs it) in the
user's specs folder, and joins the run's models there (a shipped run gets an overlay copy, see
``milebench.benchmarks.milebench.spec.registry``). Both are made in memory first, so every prediction
file is read and checked before any file, spec or prediction, is written."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import yaml

from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.io import atomic_write_text
from milebench.spec.base import SpecError, read_yaml
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.model import ModelSpec
from milebench.spec.names import UnknownName

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class NewModel:
    """The specs with the new model in the run, and the two files that say so once the import is checked."""

    specs: Specs
    run: RunSpec
    files: dict[Path, str]

    def write(self) -> None:
        for path, text in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
            log.info("wrote %s", path)


def new_model(specs: Specs, run: RunSpec, name: str, display_name: str, outputs: Path) -> NewModel:
    """``specs`` and ``run`` with model ``name`` added, or an argument error (exit 2) saying why not."""
    folder = Path(specs.root)
    if folder.resolve() == DEFAULT_SPECS.resolve():
        raise UnknownName(
            folder, "models", "--new-model", "writes the model's spec: give --specs a folder of your own"
        )
    if name in specs.models:
        problem = f"model spec {name!r} exists; add it to run {run.name!r} instead of --new-model"
        raise UnknownName(folder / "models", "name", "--model", problem)
    fields = {
        "name": name,
        "display_name": display_name,
        "section": "user",
        "adapter": "unported",
        "weights": {"kind": "external"},
        "notes": f"Predictions imported from {outputs} (milebench import-official); the kit does not run "
        "this model.",
    }
    try:
        spec = ModelSpec.model_validate(fields)
    except ValueError as err:
        raise UnknownName(folder / "models", "name", "--model", f"{name!r}: {err}") from None
    run_file = specs.file(f"runs/{run.name}.yaml")
    data = read_yaml(run_file)
    if not isinstance(data, dict):
        raise SpecError(run_file, [("<file>", "not a mapping")])
    data["models"] = [*data.get("models", []), name]
    joined = RunSpec.model_validate(data)
    return NewModel(
        specs=dataclasses.replace(
            specs, models={**specs.models, name: spec}, runs={**specs.runs, run.name: joined}
        ),
        run=joined,
        files={
            folder / "models" / f"{name}.yaml": yaml.safe_dump(fields, sort_keys=False),
            folder / "runs" / f"{run.name}.yaml": yaml.safe_dump(data, sort_keys=False),
        },
    )
