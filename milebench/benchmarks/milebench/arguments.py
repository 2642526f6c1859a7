"""The options of MileBench's stage commands: a job's run, model, task and mode."""

from __future__ import annotations

import argparse

from milebench.arguments import run_root_args
from milebench.benchmarks.milebench.spec.run import Mode


def mode_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", type=Mode, choices=list(Mode), default=Mode.MULTI_IMAGE, help="The mode.")


def job_args(
    p: argparse.ArgumentParser, model: bool, task_required: bool = True, many_tasks: bool = False
) -> None:
    run_root_args(p)
    if model:
        p.add_argument("--model", required=True, help="A model of the run.")
    if many_tasks:
        p.add_argument(
            "--task",
            action="append",
            required=True,
            help="A task; repeat it to answer several, loading once.",
        )
    elif task_required:
        p.add_argument("--task", required=True, help="A task of the run.")
    else:
        p.add_argument(
            "--task",
            help="A task of the run; required without --official-outputs (default there: every task).",
        )
    p.add_argument("--mode", required=True, type=Mode, choices=list(Mode), help="The mode.")
