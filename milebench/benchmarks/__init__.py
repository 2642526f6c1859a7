"""Benchmarks served by the kit's shared core (specs, I/O, provenance, report rendering).

Each benchmark declares itself in its module here (``BENCHMARK``): its name, its specs folder, its
Snakemake rules file and its run spec model. A run spec names its benchmark (``benchmark:``, default
``milebench``), and the top Snakefile includes that benchmark's rules. A third benchmark is one package
here, its specs under ``specs/<benchmark>/`` and its rules in ``rules/<benchmark>.smk``.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path

from pydantic import BaseModel, Field

from milebench.spec.base import Spec, SpecError, load_spec, read_yaml

DEFAULT = "milebench"
"""The benchmark of a run spec that names none."""


class Benchmark(Spec):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    specs: str = Field(description="Its folder under the specs root; '' for the root itself (MileBench's).")
    rules: str = Field(description="Its Snakemake rules file, relative to the top Snakefile.")
    run_model: str = Field(
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", description="``module:Class`` of its run specs."
    )

    def runs_folder(self, specs_root: Path) -> Path:
        return Path(specs_root) / self.specs / "runs"

    def run_spec_model(self) -> type[BaseModel]:
        module, name = self.run_model.split(":")
        model: type[BaseModel] = getattr(importlib.import_module(module), name)
        return model


@cache
def benchmarks() -> dict[str, Benchmark]:
    """Every benchmark the package declares, by name (each module here with a ``BENCHMARK``)."""
    found: dict[str, Benchmark] = {}
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):
        declared = getattr(importlib.import_module(module.name), "BENCHMARK", None)
        if isinstance(declared, Benchmark):
            found[declared.name] = declared
    return found


def benchmark_of_run(specs_root: Path, name: str) -> Benchmark:
    """The benchmark run spec ``name`` names; MileBench when no benchmark has a run of that name (its
    loader then says which runs exist). The file is validated by that benchmark's run spec model. An
    overlay folder (``milebench.spec.registry``) without the run has it from the shipped folder."""
    from milebench.spec.registry import overlay_base

    known = benchmarks()
    paths = [p for b in known.values() if (p := b.runs_folder(specs_root) / f"{name}.yaml").is_file()]
    base = overlay_base(specs_root)
    if not paths and base is not None:
        specs_root = base
        paths = [p for b in known.values() if (p := b.runs_folder(base) / f"{name}.yaml").is_file()]
    if not paths:
        return known[DEFAULT]
    if len(paths) > 1:
        raise SpecError(
            paths[0], [("name", f"run {name!r} is also defined in {', '.join(map(str, paths[1:]))}")]
        )
    path = paths[0]
    data = read_yaml(path)
    named = data.get("benchmark", DEFAULT) if isinstance(data, dict) else DEFAULT
    if named not in known:
        problem = f"unknown benchmark {named!r}; known: {', '.join(sorted(known))}"
        raise SpecError(path, [("benchmark", problem)])
    benchmark = known[named]
    if path.parent != benchmark.runs_folder(specs_root):
        problem = f"runs of {named!r} belong in {benchmark.runs_folder(specs_root)}"
        raise SpecError(path, [("benchmark", problem)])
    load_spec(path, benchmark.run_spec_model())
    return benchmark
