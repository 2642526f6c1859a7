"""What one job of a run costs apart from its computation, in this checkout against a baseline checkout.

Every Snakemake job is one ``milebench`` process (212 of them in the smoke run), so what each process pays
before its handler computes anything is paid once per job. For each side (this checkout with this
interpreter; the baseline with its own ``.venv``), each the fastest of ``--repeats`` fresh processes:
- ``python -c pass``: the interpreter's start, the floor;
- ``milebench --help``: the interpreter, the kit's command and its parser;
- in one process per command the smoke run's rules call, as ``milebench.cli.main`` runs it: the kit's
  command imported, its parser built, the command's handler imported, the adapter registry read, the
  specs loaded (the handler's first work); and how often, and how long, that process read the entry
  points of installed distributions (``importlib.metadata.entry_points``);
- ``snakemake -n`` of the smoke run from an empty folder (the plan of all its jobs), beside
  ``snakemake --version`` (Snakemake's own start).
Each is timed in wall and CPU seconds (CPU: the process's and its children's, less noisy on a shared
machine); the sides take turns, and each figure is the fastest of its repeats. The ratios are this
checkout's over the baseline's; ``x n`` is how often the smoke run pays the row (once for Snakemake's,
once per job of a command for its handler and its sum, once per ``milebench`` job for the rest), and the
last column the CPU difference times that. A step an earlier step already did costs nothing (the
baseline's handlers read the adapter registry as they are imported): compare the sums.
Run: ``python benchmarks/job_overhead.py BASELINE [--baseline-python PY] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = ("preprocess", "infer", "score", "aggregate", "report")
"""The commands of the smoke run's rules that run once per task or cell, or once per run."""

PROBE = r"""
import importlib, json, sys, time
import importlib.metadata as metadata

reads = [0, 0.0]
entry_points = metadata.entry_points

def counted(**params):
    start = time.perf_counter()
    try:
        return entry_points(**params)
    finally:
        reads[0] += 1
        reads[1] += time.perf_counter() - start

metadata.entry_points = counted
steps = {}

def step(name, work):
    wall, cpu = time.perf_counter(), time.process_time()
    value = work()
    steps[name] = (time.perf_counter() - wall, time.process_time() - cpu)
    return value

cli = step("import milebench.cli", lambda: importlib.import_module("milebench.cli"))
parser = step("build the parser", cli.build_parser)
sub = next(a for a in parser._actions if a.choices and sys.argv[1] in a.choices)
module = sub.choices[sys.argv[1]].get_default("target").split(":")[0]
step("import the handler", lambda: importlib.import_module(module))
adapters = importlib.import_module("milebench.spec.adapters")
step("read the adapter registry", adapters.declared_adapters)
try:  # MileBench's registry, where a checkout before the core's split holds it too
    registry = importlib.import_module("milebench.benchmarks.milebench.spec.registry")
except ModuleNotFoundError:
    registry = importlib.import_module("milebench.spec.registry")
step("load the specs", registry.load_specs)
print(json.dumps({"steps": steps, "entry_point_reads": reads}))
"""


@dataclass(frozen=True)
class Side:
    python: Path
    tree: Path
    env: dict[str, str]


@dataclass(frozen=True)
class Timed:
    wall_s: float
    cpu_s: float


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[Timed, str]:
    """One run of ``command``: its wall time, the CPU time of it and its children, and its output."""
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{done.stderr[-3000:]}")
    return Timed(wall, cpu), done.stdout + done.stderr


def best(runs: Sequence[Timed]) -> Timed:
    return Timed(min(r.wall_s for r in runs), min(r.cpu_s for r in runs))


def processes(side: Side, cwd: Path) -> tuple[dict[str, Timed], str]:
    """The whole-process measurements of one side, once each, and what the plan printed."""
    snakemake = [str(side.python), "-m", "snakemake", "--snakefile", str(side.tree / "Snakefile")]
    commands = {
        "python -c pass": [str(side.python), "-c", "pass"],
        "milebench --help": [str(side.python), "-m", "milebench", "--help"],
        "snakemake --version": [*snakemake, "--version"],
    }
    found = {name: timed(command, cwd, side.env)[0] for name, command in commands.items()}
    plan = "snakemake -n, smoke run (plan of every job)"
    found[plan], out = timed([*snakemake, "-n", "--quiet", "rules", "--cores", "2"], cwd, side.env)
    return found, out


@dataclass(frozen=True)
class Reads:
    count: int
    seconds: float


def probed(side: Side, cwd: Path) -> tuple[dict[str, Timed], dict[str, Reads]]:
    """The steps of a job's start in one process per command, once each (the handler's import per
    command, and their sum), and the entry point reads of each command's process."""
    steps: dict[str, Timed] = {}
    reads: dict[str, Reads] = {}
    for command in COMMANDS:
        _, out = timed([str(side.python), "-c", PROBE, command], cwd, side.env)
        found = json.loads(out.strip().splitlines()[-1])
        for name, (wall, cpu) in found["steps"].items():
            key = f"import the {command} handler" if name == "import the handler" else name
            steps[key] = min(steps.get(key, Timed(wall, cpu)), Timed(wall, cpu), key=lambda t: t.cpu_s)
        walls, cpus = zip(*found["steps"].values(), strict=True)
        steps[f"all of them, {command}"] = Timed(sum(walls), sum(cpus))
        reads[command] = Reads(*found["entry_point_reads"])
    return steps, reads


def job_counts(plan: str) -> dict[str, int]:
    """The jobs a dry run planned, by rule, from its job table."""
    table = plan[plan.index("Job stats:") :].split("total")[0]
    counts = {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}
    if not counts:
        raise RuntimeError(f"no job table in the dry run's output:\n{plan[-3000:]}")
    return counts


def per_run(name: str, counts: dict[str, int]) -> int:
    """How many times a run pays what row ``name`` measures: once for Snakemake's own, once per job of a
    command for its handler, once per ``milebench`` job (every job but the target rule) for the rest."""
    if name.startswith("snakemake"):
        return 1
    command = next((c for c in COMMANDS if name.endswith((f" {c}", f" {c} handler"))), None)
    if command is not None:
        return sum(n for rule, n in counts.items() if rule.startswith(command))
    return sum(counts.values()) - counts.get("all", 0)


def table(rows: dict[str, tuple[Timed, Timed]], counts: dict[str, int]) -> list[str]:
    head = f"{'':48} {'base wall':>9} {'wall':>7} {'ratio':>6} {'base cpu':>9} {'cpu':>7} {'ratio':>6}"
    lines = [f"{head} {'x n':>5} {'cpu diff x n':>13}"]
    for name, (base, this) in rows.items():
        n = per_run(name, counts)
        lines.append(
            f"{name:48} {base.wall_s:9.3f} {this.wall_s:7.3f} {this.wall_s / base.wall_s:6.2f} "
            f"{base.cpu_s:9.3f} {this.cpu_s:7.3f} {this.cpu_s / base.cpu_s:6.2f} {n:5d} "
            f"{(this.cpu_s - base.cpu_s) * n:13.1f}"
        )
    return lines


def reads_table(base: dict[str, Reads], this: dict[str, Reads]) -> list[str]:
    lines = [f"{'entry point reads, per process':48} {'base n':>9} {'n':>7} {'base s':>9} {'s':>7}"]
    for command in COMMANDS:
        b, t = base[command], this[command]
        lines.append(f"{'  ' + command:48} {b.count:9d} {t.count:7d} {b.seconds:9.3f} {t.seconds:7.3f}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path, help="A checkout of the kit with its own installed .venv.")
    parser.add_argument(
        "--baseline-python",
        type=Path,
        default=None,
        help="Its interpreter (default: BASELINE/.venv/bin/python).",
    )
    parser.add_argument("--repeats", type=int, default=5, help="Timed repeats; the fastest counts.")
    args = parser.parse_args()
    base_tree = args.baseline.resolve()
    # The baseline imports its own checkout, whatever PYTHONPATH this one was given.
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    sides = (
        Side(args.baseline_python or base_tree / ".venv" / "bin" / "python", base_tree, base_env),
        Side(Path(sys.executable), REPO, dict(os.environ)),
    )
    timings: list[dict[str, list[Timed]]] = [{}, {}]
    reads: list[dict[str, Reads]] = [{}, {}]
    plan = ""
    # A scratch folder as the working directory: no checkout's package shadows the installed one. The
    # sides take turns, so a burst of load on the shared machine falls on both.
    with tempfile.TemporaryDirectory(prefix="milebench-job-overhead-") as tmp:
        cwd = Path(tmp)
        for _ in range(args.repeats):
            for i, side in enumerate(sides):
                steps, side_reads = probed(side, cwd)
                whole, plan = processes(side, cwd)
                for name, one in {**whole, **steps}.items():
                    timings[i].setdefault(name, []).append(one)
                for command, read in side_reads.items():
                    if command not in reads[i] or read.seconds < reads[i][command].seconds:
                        reads[i][command] = read
    counts = job_counts(plan)
    fastest = [{name: best(runs) for name, runs in side.items()} for side in timings]
    # The whole processes, the steps every command takes, each command's handler, each command's sum.
    order = sorted(fastest[1], key=lambda name: (" handler" in name) + 2 * name.startswith("all of them"))
    rows = {name: (fastest[0][name], fastest[1][name]) for name in order}
    lines = [
        f"fastest of {args.repeats}; baseline {base_tree}, this {REPO}; the smoke run plans "
        f"{sum(counts.values())} jobs",
        *table(rows, counts),
        *reads_table(*reads),
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
