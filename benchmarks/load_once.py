"""Loading each model once: the smoke run end to end, with the kit of another git ref and with this one.

Both runs go through Snakemake from an empty folder, one after the other, on the same specs (this
checkout's, with the smoke run's models, modes and data; ``--tasks N`` keeps its first N tasks for a quick
check), ``--cores`` as given. ``before`` is the tree of ``--before`` (default ``main``: one infer job per
(model, task, mode), each importing torch and loading its model), ``after`` this checkout (one infer job
per (model, mode) for the models that load weights; ``--after REF``: that ref's tree). For each run:
- wall time of the whole ``snakemake`` command, and its CPU time (every process it waited for);
- jobs run, and the infer stage's CPU time (the sum of its jobs' Snakemake benchmark records);
- model loads: the infer processes whose log shows transformers loading weights (one load each);
and whether every prediction is the same in both runs (all fields but ``seconds``, the time taken).
Run: ``python benchmarks/load_once.py [--before REF] [--after REF] [--tasks N] [--cores N] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import yaml

from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.spec.folder import DEFAULT_SPECS

REPO = Path(__file__).resolve().parents[1]
RUN = "bench-load-once"
LOAD_MARK = "Loading weights"
"""What transformers writes to a job's log each time it loads a checkpoint."""


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float
    jobs: int
    infer_cpu_s: float
    loads: int


def export_tree(ref: str, into: Path) -> Path:
    """The files of ``ref`` in this repository, written to ``into``."""
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def bench_specs(root: Path, n_tasks: int | None) -> Path:
    """A copy of this checkout's specs with the smoke run renamed (and cut to ``n_tasks`` tasks)."""
    specs = root / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    run = yaml.safe_load((specs / "runs" / "smoke.yaml").read_text())
    run["name"] = RUN
    if n_tasks is not None:
        tasks = list(load_specs(specs).tasks) if run["tasks"] == "all" else run["tasks"]
        run["tasks"] = tasks[:n_tasks]
    (specs / "runs" / f"{RUN}.yaml").write_text(yaml.safe_dump(run))
    return specs


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_smoke(tree: Path, specs: Path, workdir: Path, cores: int) -> Measured:
    """One Snakemake run of the bench run with the kit in ``tree``, in the empty folder ``workdir``."""
    workdir.mkdir(parents=True)
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(tree / "Snakefile"),
        "--cores",
        str(cores),
    ]
    command += ["--config", f"run={RUN}", f"specs={specs}"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed in {workdir}:\n{done.stderr[-3000:]}")
    out = workdir / "results" / RUN
    records = list((out / "benchmarks").glob("*/*.tsv"))
    infer_cpu = sum(cpu_time(p) for p in records if p.parent.name == "infer")
    loads = sum(LOAD_MARK in p.read_text(errors="replace") for p in (out / "logs" / "infer").glob("*.log"))
    return Measured(wall, cpu, len(records), infer_cpu, loads)


def cpu_time(record: Path) -> float:
    with open(record) as fh:
        return float(next(csv.DictReader(fh, delimiter="\t"))["cpu_time"])


def predictions(workdir: Path) -> dict[str, list[dict[str, object]]]:
    """Every predictions file of the run, each record without the time it took."""
    found = {}
    for path in sorted((workdir / "results" / RUN / "predictions").rglob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        found[str(path.relative_to(workdir))] = [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    return found


def table(before: Measured, after: Measured, ref: str) -> str:
    rows = [
        ("wall time (s)", before.wall_s, after.wall_s),
        ("CPU time, all processes (s)", before.cpu_s, after.cpu_s),
        ("CPU time, infer jobs (s)", before.infer_cpu_s, after.infer_cpu_s),
        ("jobs", before.jobs, after.jobs),
        ("model loads", before.loads, after.loads),
    ]
    lines = [f"{'':30} {'before (' + ref + ')':>16} {'after':>10} {'after/before':>13}"]
    for name, b, a in rows:
        ratio = f"{a / b:13.2f}" if b else f"{'-':>13}"
        lines.append(f"{name:30} {b:16.1f} {a:10.1f} {ratio}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", default="main", help="Git ref of the kit to compare with (default: main)."
    )
    parser.add_argument("--after", default=None, help="Git ref to measure instead of this checkout's files.")
    parser.add_argument("--tasks", type=int, default=None, help="Keep the smoke run's first N tasks.")
    parser.add_argument("--cores", type=int, default=2, help="Snakemake --cores of both runs.")
    parser.add_argument("--keep", type=Path, default=None, help="Keep both runs' folders here.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="milebench-load-once-") as tmp:
        root = args.keep.resolve() if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        specs = bench_specs(root, args.tasks)
        old = export_tree(args.before, root / "before-tree")
        before = run_smoke(old, specs, root / "before", args.cores)
        new = export_tree(args.after, root / "after-tree") if args.after else REPO
        after = run_smoke(new, specs, root / "after", args.cores)
        same = predictions(root / "before") == predictions(root / "after")
        n = len(predictions(root / "after"))
    tasks = "all tasks" if args.tasks is None else f"first {args.tasks} tasks"
    header = f"smoke run ({tasks}), --cores {args.cores}"
    verdict = (
        f"predictions identical in both runs (but for seconds taken): {'yes' if same else 'NO'} ({n} files)"
    )
    sys.stdout.write(f"{header}\n{table(before, after, args.before)}\n{verdict}\n")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
