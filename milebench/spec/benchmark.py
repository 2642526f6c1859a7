"""Benchmarks plug into the kit's core through one declaration each: an entry point of the group
``milebench.benchmarks`` naming a :class:`Benchmark` (its name, specs folder and spec kinds, Snakemake
rules file, run spec model, specs check and CLI commands). The core names no benchmark; MileBench and
MMLongEmbed declare themselves in the kit's ``pyproject.toml`` as any other distribution would in its own.

A run spec names its benchmark (``benchmark:``, default ``milebench``), and the top Snakefile includes that
benchmark's rules alone.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from milebench.errors import KitError
from milebench.plugins import registered
from milebench.spec.base import Spec, SpecError, load_spec, read_yaml
from milebench.spec.folder import overlay_base

ENTRY_POINTS = "milebench.benchmarks"
"""The entry point group a benchmark declares itself in."""
DEFAULT = "milebench"
"""The benchmark of a run spec that names none."""


class BadDeclaration(KitError):
    """An entry point of the group that does not name a Benchmark, or no MileBench among them (the kit's
    package metadata missing or stale): named, with what fixes it."""

    exit_status = 2


MODULE_ATTRIBUTE = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
"""``module:name`` of a class or function."""


class SpecKind(Spec):
    """A kind of a benchmark's spec files: the model that validates each, and where they are."""

    model: str = Field(pattern=MODULE_ATTRIBUTE, description="``module:Class`` validating each file.")
    files: str = Field(
        pattern=r"^[\w.-]+(/[\w.-]+)*/?$",
        description="Under the benchmark's specs folder: a folder ending in `/`, every `*.yaml` in it one "
        "spec named by its file, or one file, validated where it exists.",
    )

    def spec_model(self) -> type[BaseModel]:
        model: type[BaseModel] = imported(self.model)
        return model


class Benchmark(Spec):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    specs: str = Field(
        description="Its specs folder: a folder under the specs root ('' for the root itself, MileBench's), "
        "or `package:folder` inside an installed package."
    )
    rules: str = Field(
        description="Its Snakemake rules file: relative to the top Snakefile, or `package:file` inside an "
        "installed package."
    )
    run_model: str = Field(
        pattern=MODULE_ATTRIBUTE, description="``module:Class`` of its run specs, the files of `runs/`."
    )
    kinds: dict[str, SpecKind] = Field(
        default_factory=dict,
        description="Its other spec kinds by name: `check-specs` validates their files, `export-schemas` "
        "publishes their schemas.",
    )
    check: str | None = Field(
        default=None,
        pattern=MODULE_ATTRIBUTE,
        description="``module:function`` called with the specs root after its files are valid: checks the "
        "references between its specs (a SpecError names the file and field) and returns what it found, "
        "for `check-specs` to say.",
    )
    commands: str | None = Field(
        default=None,
        pattern=MODULE_ATTRIBUTE,
        description="``module:function`` that adds its subcommands to the `milebench` parser, called with "
        "the parser's `add(name, target, help)`; the shared options are in `milebench.arguments`.",
    )
    bundles: str | None = Field(
        default=None,
        pattern=MODULE_ATTRIBUTE,
        description="``module:object`` of its part in artifact bundles (``milebench.archive.hooks."
        "BundleHooks``): without it, `archive` refuses its runs.",
    )
    title: str | None = Field(
        default=None,
        min_length=1,
        description="The heading its commands are listed under in `milebench --help`; default: its name.",
    )
    examples: tuple[str, ...] = Field(
        default=(),
        description="Command lines of its own (`milebench ...  # what it does`) that `milebench --help` "
        "shows among the examples.",
    )

    def folder(self, specs_root: Path) -> Path:
        """Its specs folder under ``specs_root`` (or in its package)."""
        return located(self.specs, Path(specs_root))

    def runs_folder(self, specs_root: Path) -> Path:
        return self.folder(specs_root) / "runs"

    def rules_file(self, snakefile_folder: Path) -> Path:
        return located(self.rules, Path(snakefile_folder))

    def run_spec_model(self) -> type[BaseModel]:
        model: type[BaseModel] = imported(self.run_model)
        return model

    def spec_kinds(self) -> dict[str, SpecKind]:
        """Every kind of its spec files, its runs first (schema name ``run``)."""
        return {"run": SpecKind(model=self.run_model, files="runs/"), **self.kinds}


def imported(reference: str) -> Any:
    """The object a ``module:name`` reference of a declaration names; one that names nothing is a
    BadDeclaration saying which reference and why."""
    module, name = reference.split(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise BadDeclaration(f"{reference!r} of a milebench benchmark declaration: {err}") from None


def located(text: str, base: Path) -> Path:
    """``package:path`` inside that installed package, else ``text`` relative to ``base``."""
    package, sep, inner = text.partition(":")
    if sep and all(part.isidentifier() for part in package.split(".")):
        return Path(str(files(package) / inner))
    return base / text


@cache
def benchmarks() -> dict[str, Benchmark]:
    """Every installed benchmark by name, from the entry points of :data:`ENTRY_POINTS`."""
    found: dict[str, Benchmark] = {}
    for point in sorted(registered(ENTRY_POINTS), key=lambda p: p.name):
        declared = point.load()
        if not isinstance(declared, Benchmark):
            raise BadDeclaration(
                f"entry point {point.name} = {point.value!r} of group {ENTRY_POINTS}: "
                f"not a milebench Benchmark (got {type(declared).__name__})"
            )
        found[declared.name] = declared
    if DEFAULT not in found:
        raise BadDeclaration(
            f"no benchmark {DEFAULT!r} among the entry points of group {ENTRY_POINTS} (found: "
            f"{', '.join(sorted(found)) or 'none'}): the kit's package metadata is missing or stale; "
            "reinstall the kit (pip install -e .)"
        )
    return found


def benchmark_of_run(specs_root: Path, name: str) -> Benchmark:
    """The benchmark run spec ``name`` names; MileBench when no benchmark has a run of that name (its
    loader then says which runs exist). The file is validated by that benchmark's run spec model. An
    overlay folder (``milebench.spec.folder``) without the run has it from the shipped folder."""
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
