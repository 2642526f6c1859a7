"""CLI handlers ``check-specs`` and ``export-schemas``: validate every benchmark's specs, publish their
schemas. Each benchmark's declaration (``milebench.spec.benchmark``) names its spec kinds and the check of
the references between them."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from milebench.io import atomic_write_text
from milebench.spec.base import load_spec
from milebench.spec.benchmark import Benchmark, SpecKind, benchmarks, imported
from milebench.spec.folder import DEFAULT_SPECS, load_kind, overlay_base, resolve_file

log = logging.getLogger(__name__)


def kind_files(benchmark: Benchmark, specs_root: Path, kind: SpecKind) -> list[Path]:
    """The files of ``kind`` under ``specs_root`` (over the shipped ones where it is an overlay), each
    validated by the kind's model; a folder's specs named by their files. A single file that is absent is
    for the benchmark's own check to require (a run names its lock, say)."""
    shipped = overlay_base(specs_root)
    root = benchmark.folder(specs_root)
    base = None if shipped is None else benchmark.folder(shipped)
    model = kind.spec_model()
    if kind.files.endswith("/"):
        return [path for path, _ in load_kind(root, kind.files.rstrip("/"), model, base).values()]
    path = resolve_file(root, base, kind.files)
    if not path.exists():
        return []
    load_spec(path, model)
    return [path]


def check(args: argparse.Namespace) -> int:
    """Every benchmark's spec files, then the references between them; a SpecError propagates so the CLI
    reports it and exits 2. A whole specs folder (not an overlay) without a benchmark's folder has none of
    its runs, so that benchmark is left out, said."""
    whole = overlay_base(args.specs) is None
    for benchmark in benchmarks().values():
        title = benchmark.title or benchmark.name
        if whole and not benchmark.folder(args.specs).is_dir():
            log.info(
                "%s: no specs folder %s in this whole specs folder, nothing to check", title, benchmark.specs
            )
            continue
        counts = {
            name: len(kind_files(benchmark, args.specs, k)) for name, k in benchmark.spec_kinds().items()
        }
        if benchmark.check is None:
            found = ", ".join(f"{n} {name}" for name, n in counts.items())
        else:
            checked: Callable[[Path], str] = imported(benchmark.check)
            found = checked(Path(args.specs))
        log.info("%s specs OK: %s", title, found)
    return 0


def schema_models(benchmark: Benchmark) -> dict[str, type[BaseModel]]:
    """The benchmark's spec models by schema name."""
    return {name: kind.spec_model() for name, kind in benchmark.spec_kinds().items()}


def schema_text(model: type[BaseModel]) -> str:
    """Deterministic JSON Schema text, so a stale committed schema shows up as a byte difference."""
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def schemas_folder(benchmark: Benchmark, out: Path | None) -> Path:
    """Where its schemas go: ``schemas/`` in its shipped specs folder, or ``out/<benchmark>``."""
    return benchmark.folder(DEFAULT_SPECS) / "schemas" if out is None else Path(out) / benchmark.name


def export(args: argparse.Namespace) -> int:
    """Write ``<kind>.schema.json`` for each spec kind of each benchmark (for editors and reviewers)."""
    for benchmark in benchmarks().values():
        folder = schemas_folder(benchmark, args.out)
        models = schema_models(benchmark)
        for name, model in models.items():
            atomic_write_text(folder / f"{name}.schema.json", schema_text(model))
        log.info("wrote %d %s schemas to %s", len(models), benchmark.name, folder)
    return 0
