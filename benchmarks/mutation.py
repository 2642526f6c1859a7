"""Mutation score of the code that decides numbers: how many planted bugs the tests catch, per package.

``mutmut`` (configured in ``pyproject.toml``, ``[tool.mutmut]``) copies the project into ``mutants/``,
plants one small change at a time in ``milebench/score``, ``preprocess``, ``data`` and ``spec`` (a flipped
comparison, an off-by-one, a dropped argument, a changed string...) and runs only the tests that reach the
changed function. A mutant the tests catch is killed; one they do not is a survivor. Log lines are not
mutated (they decide no number). The score is killed (and timed out) over all mutants, "no tests" counted
as survivors, as ``mutmut`` itself reckons it.

Run one package at a time, niced (it is CPU-bound; the results are cached in ``mutants/``)::

    python benchmarks/mutation.py run score preprocess data spec   # mutate, test, then print the table
    python benchmarks/mutation.py run --pending score               # only mutants with no cached result
    python benchmarks/mutation.py run --sample 150 spec             # a random sample, scored on its own row
    python benchmarks/mutation.py report [--survivors]              # the table from the cached results

``mutmut show <name>`` prints a survivor's change; ``mutmut run <name>...`` re-tests chosen mutants.
Each package takes tens of minutes on a shared two-core machine (see ``README.md`` for measured times),
so this is not part of the per-commit test run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTANTS = REPO / "mutants"
PACKAGES = (
    "score",
    "preprocess",
    "data",
    "spec",
    "benchmarks/milebench/score",
    "benchmarks/milebench/preprocess",
    "benchmarks/milebench/data",
)
"""Folders under ``milebench/``: the core's, then MileBench's own (its judges, prompts and data checks)."""
VERDICT_MODULES = ("aggregate", "run_aggregate", "uncertainty", "verdict")
"""The verdict and aggregation (inside ``score/``), shown on a line of their own."""

STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped"}
"""``mutmut``'s exit codes; timeouts (CPU limit signals) count as killed, anything else as suspicious."""
TIMEOUT_CODES = {-24, 24, 152, 255, 36}


@dataclass(frozen=True)
class Row:
    label: str
    counts: Counter[str]

    @property
    def tested(self) -> int:
        return sum(n for status, n in self.counts.items() if status not in ("skipped", "not checked"))

    @property
    def score(self) -> float | None:
        caught = self.counts["killed"] + self.counts["timeout"]
        return 100 * caught / self.tested if self.tested else None


def status(code: int | None) -> str:
    if code is None:
        return "not checked"
    if code in TIMEOUT_CODES:
        return "timeout"
    return STATUS.get(code, "suspicious")


def results(package: str) -> dict[str, str]:
    """Mutant name -> status, from ``mutmut``'s per-file ``.meta`` records."""
    found = {}
    for meta in sorted((MUTANTS / "milebench" / package).glob("*.py.meta")):
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        found.update({name: status(code) for name, code in codes.items()})
    return found


def rows(packages: Iterable[str]) -> list[Row]:
    out = []
    for package in packages:
        found = results(package)
        out.append(Row(f"{package}/", Counter(found.values())))
        if sample_path(package).exists():
            drawn = sample_path(package).read_text(encoding="utf-8").split()
            out.append(
                Row(f"  random sample of {len(drawn)}", Counter(found[n] for n in drawn if n in found))
            )
        if package == "score":
            prefixes = tuple(f"milebench.score.{m}." for m in VERDICT_MODULES)
            part = Counter(s for name, s in found.items() if name.startswith(prefixes))
            out.append(Row("  verdict+aggregation", part))
    return out


def table(found: list[Row]) -> str:
    columns = ("killed", "timeout", "survived", "no tests", "suspicious", "not checked")
    head = f"{'package':<22}{'score':>7}" + "".join(f"{c:>12}" for c in columns)
    lines = [head]
    for row in found:
        score = "-" if row.score is None else f"{row.score:.1f}%"
        lines.append(f"{row.label:<22}{score:>7}" + "".join(f"{row.counts[c]:>12}" for c in columns))
    return "\n".join(lines)


def survivors(packages: Iterable[str]) -> list[str]:
    return [
        name
        for package in packages
        for name, s in results(package).items()
        if s in ("survived", "no tests", "suspicious")
    ]


def sample_path(package: str) -> Path:
    return MUTANTS / f"{package.replace('/', '.')}.sample"


def draw_sample(package: str, size: int) -> list[str]:
    """``size`` of the package's mutants drawn at random (fixed seed), saved so the report can score them:
    an unbiased estimate where testing every mutant takes too long (mutmut runs the fastest first)."""
    found = sorted(results(package))
    drawn = sorted(random.Random(0).sample(found, min(size, len(found))))
    sample_path(package).write_text("\n".join(drawn) + "\n", encoding="utf-8")
    return drawn


def run_package(package: str, max_children: int, pending: bool, sample: int | None) -> float:
    """Mutate and test one package under ``nice``; returns the wall time in seconds.

    ``pending`` tests only the mutants without a cached result (a stopped run, or functions changed since);
    ``sample`` only the pending ones of a random sample of that size.
    """
    started = time.monotonic()
    if not pending and sample is None:
        run_mutmut([f"milebench.{package.replace('/', '.')}.*"], max_children)
    else:
        found = results(package)
        chosen = draw_sample(package, sample) if sample is not None else list(found)
        if names := [name for name in chosen if found[name] == "not checked"]:
            run_mutmut(names, max_children)
    return time.monotonic() - started


def run_mutmut(names: list[str], max_children: int) -> None:
    mutmut = shutil.which("mutmut") or str(Path(sys.executable).with_name("mutmut"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # tests must import the mutants
    command = ["nice", "-n", "19", mutmut, "run", "--max-children", str(max_children), *names]
    subprocess.run(command, cwd=REPO, env=env, check=False, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="mutate and test packages, then print the table")
    run.add_argument("packages", nargs="*", metavar="package", help=f"{', '.join(PACKAGES)} (default: all)")
    run.add_argument("--max-children", type=int, default=2, help="mutants tested at once")
    run.add_argument("--pending", action="store_true", help="only the mutants with no cached result")
    run.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="only a random sample of N mutants (scored on a row of its own)",
    )
    report = sub.add_parser("report", help="print the table from the cached results")
    report.add_argument(
        "packages", nargs="*", metavar="package", help=f"{', '.join(PACKAGES)} (default: all)"
    )
    report.add_argument("--survivors", action="store_true", help="also list every survivor")
    args = parser.parse_args(argv)
    packages = args.packages or list(PACKAGES)
    if unknown := sorted(set(packages) - set(PACKAGES)):
        parser.error(f"unknown package(s) {', '.join(unknown)}; known: {', '.join(PACKAGES)}")

    lines = []
    if args.command == "run":
        for package in packages:
            seconds = run_package(package, args.max_children, args.pending, args.sample)
            lines.append(f"{package}: {seconds / 60:.1f} min wall")
    lines.append(table(rows(packages)))
    if args.command == "report" and args.survivors:
        lines += ["", *survivors(packages)]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
