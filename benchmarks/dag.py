"""Planning cost of the DAG: how long Snakemake takes to decide what to run.

Two measurements, each the fastest of ``--repeats`` runs, in a scratch folder:
- ``snakemake -n`` for the paper run spec (every model x 29 tasks x modes; no data needed to plan);
- ``snakemake -n`` after a complete small run (random + oracle on the fixture): the no-op re-run that
  must report nothing to do.
Both are shown against ``snakemake --version`` in the same interpreter (Python and Snakemake startup,
the floor any Snakemake command pays), so the ratio is the cost of the kit's Snakefile and DAG.
Run: ``python benchmarks/dag.py [--repeats N] [--tasks N]``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from milebench.benchmarks.milebench.plan import cells
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.spec.folder import DEFAULT_SPECS

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


def timed(command: Sequence[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return elapsed, done.stdout + done.stderr


def best_of(repeats: int, command: Sequence[str], cwd: Path) -> tuple[float, str]:
    runs = [timed(command, cwd) for _ in range(repeats)]
    return min(runs, key=lambda r: r[0])


def small_run(root: Path, n_tasks: int) -> list[str]:
    """A copy of the specs with a small run spec; returns the config arguments that select it."""
    specs = root / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    tasks = list(load_specs(specs).tasks)[:n_tasks]
    run = {
        "name": "bench",
        "description": "DAG benchmark",
        "models": ["random", "oracle"],
        "tasks": tasks,
        "data": {"kind": "fixture", "seed": 0, "samples_per_task": 2},
    }
    (specs / "runs" / "bench.yaml").write_text(yaml.safe_dump(run))
    return ["--config", "run=bench", f"specs={specs}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Timed repeats; the fastest counts.")
    parser.add_argument("--tasks", type=int, default=6, help="Tasks of the small complete run.")
    args = parser.parse_args()
    specs = load_specs()
    n_paper = len(cells(specs, specs.run("paper")))
    with tempfile.TemporaryDirectory(prefix="milebench-dag-bench-") as tmp:
        root = Path(tmp)
        baseline, _ = best_of(args.repeats, [sys.executable, "-m", "snakemake", "--version"], root)
        plan_paper, _ = best_of(
            args.repeats,
            [*SNAKEMAKE, "-n", "--quiet", "rules", "--cores", "1", "--config", "run=paper"],
            root,
        )
        config = small_run(root, args.tasks)
        timed([*SNAKEMAKE, "--cores", "all", *config], root)
        noop, noop_out = best_of(args.repeats, [*SNAKEMAKE, "-n", "--cores", "1", *config], root)
    if "Nothing to be done" not in noop_out:
        raise RuntimeError(f"the re-run after a complete run was not a no-op:\n{noop_out[-3000:]}")
    rows = [
        ("snakemake --version (baseline)", baseline),
        (f"snakemake -n, paper run ({n_paper} infer + {n_paper} score jobs)", plan_paper),
        (f"snakemake -n after a complete small run ({2 * args.tasks} cells, no-op)", noop),
    ]
    lines = [f"best of {args.repeats}", f"{'':68} {'seconds':>8} {'ratio':>7}"]
    lines += [f"{name:68} {sec:8.2f} {sec / baseline:7.2f}" for name, sec in rows]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
