"""MMLongEmbed's `milebench` subcommands, added to the parser through its benchmark declaration."""

from __future__ import annotations

from milebench.arguments import AddCommand as Add
from milebench.arguments import root_arg

RUN_HELP = "Run spec name (specs/mmlongembed/runs/<name>.yaml)."


def add_commands(add: Add) -> None:
    embed = "milebench.benchmarks.mmlongembed.commands"
    for name, handler, help_text, made_by in (
        ("embed-generate", "generate_command", "MMLongEmbed: generate the Visual Grounding set.", ()),
        (
            "embed-run",
            "run_command",
            "MMLongEmbed: score every pool with one embedder.",
            ("milebench embed-generate",),
        ),
        (
            "embed-evaluate",
            "evaluate_command",
            "MMLongEmbed: one embedder's metrics and heatmaps.",
            ("milebench embed-run",),
        ),
        (
            "embed-aggregate",
            "aggregate_command",
            "MMLongEmbed: the paper's analyses and verdict.",
            ("milebench embed-evaluate", "milebench embed-generate"),
        ),
        (
            "embed-report",
            "report_command",
            "MMLongEmbed: render the HTML and LaTeX report.",
            ("milebench embed-evaluate", "milebench embed-aggregate"),
        ),
    ):
        p = add(name, f"{embed}:{handler}", help_text, made_by=made_by)
        p.add_argument("--run", required=True, help=RUN_HELP)
        root_arg(p)
        if name in ("embed-run", "embed-evaluate"):
            p.add_argument("--model", required=True, help="An embedder of the run.")
        if name == "embed-run":
            p.add_argument(
                "--threads", type=int, default=None, help="CPU threads of the model; default: all cores."
            )
    pools = "milebench.benchmarks.mmlongembed.task_commands:pools_command"
    p = add(
        "embed-pools", pools, "MMLongEmbed: build one real-task dataset's Easy and Hard pools.", made_by=()
    )
    p.add_argument("--run", required=True, help=RUN_HELP)
    root_arg(p)
    p.add_argument("--dataset", required=True, help="A dataset of the run's real_tasks.")
