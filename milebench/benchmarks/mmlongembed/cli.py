"""MMLongEmbed's `milebench` subcommands, added to the parser through its benchmark declaration."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from milebench.arguments import root_arg

Add = Callable[[str, str, str], argparse.ArgumentParser]
"""The parser's ``add(name, target, help)``: a subcommand whose handler ``target`` is imported when run."""

RUN_HELP = "Run spec name (specs/mmlongembed/runs/<name>.yaml)."


def add_commands(add: Add) -> None:
    embed = "milebench.benchmarks.mmlongembed.commands"
    for name, handler, help_text in (
        ("embed-generate", "generate_command", "MMLongEmbed: generate the Visual Grounding set."),
        ("embed-run", "run_command", "MMLongEmbed: score every pool with one embedder."),
        ("embed-evaluate", "evaluate_command", "MMLongEmbed: one embedder's metrics and heatmaps."),
        ("embed-aggregate", "aggregate_command", "MMLongEmbed: the paper's analyses and verdict."),
        ("embed-report", "report_command", "MMLongEmbed: render the HTML and LaTeX report."),
    ):
        p = add(name, f"{embed}:{handler}", help_text)
        p.add_argument("--run", required=True, help=RUN_HELP)
        root_arg(p)
        if name in ("embed-run", "embed-evaluate"):
            p.add_argument("--model", required=True, help="An embedder of the run.")
        if name == "embed-run":
            p.add_argument(
                "--threads", type=int, default=None, help="CPU threads of the model; default: all cores."
            )
    pools = "milebench.benchmarks.mmlongembed.task_commands:pools_command"
    p = add("embed-pools", pools, "MMLongEmbed: build one real-task dataset's Easy and Hard pools.")
    p.add_argument("--run", required=True, help=RUN_HELP)
    root_arg(p)
    p.add_argument("--dataset", required=True, help="A dataset of the run's real_tasks.")
