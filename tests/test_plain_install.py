"""``pip install -e .`` with no extra runs the main job: the smoke run plans, and every module its jobs
run (their commands' handlers, the smoke models' adapters and tiny builders) imports, while every package
that only an extra brings is made impossible to import (``no_extras/sitecustomize.py``).

The packages are derived from the installed metadata: what the extras require, with everything they
require, less what the plain install requires anyway. Snakemake's executor and storage plugins (the test
extra's) stay importable: Snakemake imports every installed plugin, and a plain install has none."""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXTRAS = ("embed", "archive", "minigpt-v2", "xlsx", "test")
"""The extras a plain install leaves out (the vllm extra is its own environment)."""
SNAKEMAKE_PLUGIN = "snakemake-"


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(dist: str, extras: tuple[str, ...] = ()) -> list[str]:
    """The distributions ``dist`` requires, with those of ``extras`` (their markers' extra)."""
    found = []
    for line in metadata.requires(dist) or []:
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", line)
        if extra is None or extra.group(1) in extras:
            found.append(normal(re.split(r"[\s;<>=!\[~(]", line, maxsplit=1)[0]))
    return found


def closure(names: list[str]) -> set[str]:
    """Installed distributions reachable from ``names``."""
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = normal(stack.pop())
        if name in seen:
            continue
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        stack += requirements(name)
    return seen


def extras_only_modules() -> set[str]:
    plain = closure(requirements("milebench"))
    extra = closure(requirements("milebench", EXTRAS)) - plain - {"milebench"}
    extra -= closure([d for d in extra if d.startswith(SNAKEMAKE_PLUGIN)])
    providers = metadata.packages_distributions()
    return {
        module
        for module, dists in providers.items()
        if module.isidentifier() and all(normal(d) in extra for d in dists)
    }


IMPORT_MAIN_JOB = """
import importlib
from milebench.cli import build_parser
from milebench.infer.registry import adapter_class
from milebench.spec.adapters import tiny_families
from milebench.spec.model import TinyWeights
from milebench.benchmarks.milebench.spec.registry import load_specs

commands = {sub: p.get_default("target") for a in build_parser()._actions if hasattr(a, "choices")
            and isinstance(a.choices, dict) for sub, p in a.choices.items()}
for name in {names}:
    importlib.import_module(commands[name].split(":")[0])
specs = load_specs()
for spec in specs.run_models(specs.run("smoke")):
    adapter_class(spec)
    if isinstance(spec.weights, TinyWeights):
        importlib.import_module(tiny_families()[spec.weights.family].builder.split(":")[0])
print("imported")
"""


def test_the_main_job_needs_no_extra(tmp_path: Path) -> None:
    blocked = extras_only_modules()
    assert {"pytest", "sentence_transformers", "rocrate", "sentencepiece"} <= blocked
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "tests" / "no_extras"),
        "MILEBENCH_BLOCKED": ",".join(sorted(blocked)),
    }
    planned = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "-n", "-p"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-3000:]
    commands = sorted(set(re.findall(r"-m milebench --specs \S+ (\S+)", planned.stdout)))
    assert {"fixture", "fetch", "preprocess", "infer", "score", "aggregate", "report"} <= set(commands)
    script = IMPORT_MAIN_JOB.replace("{names}", repr(commands))
    imported = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert imported.returncode == 0 and "imported" in imported.stdout, imported.stderr[-3000:]
