"""``milebench compare``: is model A better than model B (or run A than run B) on the same samples?

Both sides are read from their judgments, so no inference is repeated; the samples judged on both
sides enter, a missing or failed one as 0, as the official denominator counts it (see
``milebench.benchmarks.milebench.score.uncertainty.compare``). The table goes to stdout, the full result
to ``--out`` as JSON when given.
"""

from __future__ import annotations

import argparse
import logging
import sys

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import applies
from milebench.benchmarks.milebench.score.run_files import RunFiles
from milebench.benchmarks.milebench.score.uncertainty import Comparison, TaskSamples, compare
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.io import atomic_write_json
from milebench.spec.base import SpecError
from milebench.spec.names import check_in_run
from milebench.stage_inputs import MissingInput, command

log = logging.getLogger(__name__)


def _check(specs: Specs, run_name: str, model: str) -> None:
    run = specs.run(run_name)
    check_in_run("model", model, run.name, run.models, specs.root / "runs" / f"{run.name}.yaml")


def _judged(
    specs: Specs, run: str, model: str, mode: Mode, tasks: list[TaskSpec], scorer: str
) -> dict[str, TaskSamples]:
    """One side's scored samples per task; a side without any judgment was never scored."""
    paths = RunPaths.for_run(specs.run(run))
    found = RunFiles(paths).samples(model, mode, tasks, scorer)
    if not found:
        made_by = command("score", run=run, model=model, task="<Task>", mode=mode)
        raise MissingInput(paths.judgments(model, "<Task>", mode), f"{scorer} judgments", made_by)
    return found


def format_table(rows: list[Comparison], label_a: str, label_b: str) -> str:
    lines = [f"{label_a} minus {label_b} (table points; 95% bootstrap interval; permutation p-value)"]
    lines.append(f"{'column':<26}{'diff':>8}{'low':>8}{'high':>8}{'p':>9}{'pairs':>7}")
    for row in rows:
        if row.difference is None:
            continue
        lines.append(
            f"{row.column:<26}{row.difference:>8.2f}{row.low:>8.2f}{row.high:>8.2f}"
            f"{row.p_value:>9.4f}{row.n_pairs:>7d}"
        )
    return "\n".join(lines) + "\n"


def compare_command(args: argparse.Namespace) -> int:
    specs = load_specs(args.specs)
    run_b = args.run_b or args.run
    model_b = args.model_b or args.model_a
    if (args.run, args.model_a) == (run_b, model_b):
        raise SpecError(specs.root / "runs", [("models", "compare needs two different models or runs")])
    _check(specs, args.run, args.model_a)
    _check(specs, run_b, model_b)
    mode = Mode(args.mode)
    tasks = [t for t in specs.tasks.values() if applies(t, mode)]
    a = _judged(specs, args.run, args.model_a, mode, tasks, args.scorer)
    b = _judged(specs, run_b, model_b, mode, tasks, args.scorer)
    rows = compare(a, b, list(specs.tasks.values()), args.resamples, args.seed)
    if not any(r.difference is not None for r in rows):
        log.error("no task has samples judged on both sides (run the score stage for both first)")
        return 1
    label_a, label_b = f"{args.run}/{args.model_a}", f"{run_b}/{model_b}"
    sys.stdout.write(format_table(rows, label_a, label_b))
    if args.out is not None:
        atomic_write_json(
            args.out,
            {
                "a": label_a, "b": label_b, "mode": mode.value, "scorer": args.scorer,
                "resamples": args.resamples, "seed": args.seed,
                "rows": [r.model_dump(mode="json") for r in rows],
            },
        )  # fmt: skip
        log.info("wrote %s", args.out)
    return 0
