"""MileBench's ``milebench`` commands (its fixture, data check, prompts, scoring, import, comparison and
report), added to the parser through its benchmark declaration and listed under its own heading."""

from __future__ import annotations

import argparse
from pathlib import Path

from milebench.arguments import (
    AddCommand,
    KitParser,
    bounded_int,
    bounded_ints,
    run_args,
    run_root_args,
    scorer_arg,
    seed_arg,
    subcommands,
    threads_arg,
)
from milebench.benchmarks.milebench.arguments import job_args, mode_arg
from milebench.benchmarks.milebench.spec.run import MAX_BATCH_SIZE, MAX_REPEATS, MAX_RESAMPLES, Mode
from milebench.infer.records import FailureKind
from milebench.spec.folder import DEFAULT_SPECS

OFFICIAL_CODE = "the official MileBench code (generate.py)"
"""What makes an official outputs folder: not a kit command."""

IMPORT_FORMATS = ("official", "lmms-eval", "vlmevalkit")
"""The prediction files ``--format`` reads (``milebench.benchmarks.milebench.score.foreign.FORMATS``; named
here so that the parser imports no scoring code)."""


def _official_args(p: argparse.ArgumentParser, required: bool) -> None:
    help_text = (
        "The folder of one model's predictions: the official outputs/<model>/ of <Task>/pred.json files, "
        "lmms-eval's <output_path>/<model>/ of samples files, or VLMEvalKit's work dir (see --format)."
    ) + ("" if required else " Default: none, score the run's own predictions.")
    p.add_argument(
        "--official-outputs", "--outputs", dest="outputs", type=Path, required=required, help=help_text
    )
    p.add_argument(
        "--format",
        choices=IMPORT_FORMATS,
        default="official",
        help="Whose prediction files: official (<Task>/pred.json or pred.jsonl), lmms-eval (--log_samples "
        "files, samples_<task>_<date>.jsonl) or vlmevalkit (<model>_<task>.xlsx, .tsv or .csv). "
        "Default: official.",
    )
    p.add_argument("--data-dir", type=Path, default=None, help="MileBench/ data root (default: the run's).")
    p.add_argument("--report", action="store_true", help="Then write the run's aggregate and its report.")


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", action="append", help="Only this model (repeatable). Default: every model.")
    p.add_argument("--task", action="append", help="Only this task (repeatable). Default: every task.")
    p.add_argument(
        "--mode",
        action="append",
        type=Mode,
        choices=list(Mode),
        help="Only this mode (repeatable). Default: every mode.",
    )
    p.add_argument(
        "--sample", action="append", type=int, help="Only this sample id (repeatable). Default: every sample."
    )
    outcome = p.add_mutually_exclusive_group()
    outcome.add_argument(
        "--correct", action="store_true", help="Only full marks under the paper scorer. Default: off."
    )
    outcome.add_argument(
        "--incorrect", action="store_true", help="Only answers scored below full marks. Default: off."
    )
    p.add_argument(
        "--status",
        choices=("scored", "missing", "failed"),
        default=None,
        help="Only this status. Default: any.",
    )
    p.add_argument(
        "--failure",
        nargs="?",
        const="any",
        default=None,
        choices=["any", *(kind.value for kind in FailureKind)],
        metavar="KIND",
        help="Only failed samples (any kind), or those of one kind: "
        + ", ".join(kind.value for kind in FailureKind)
        + ". Default: no failure filter.",
    )
    p.add_argument(
        "--json", action="store_true", help="Whole records, one a line, instead of a table. Default: off."
    )


IN_IMAGE = "milebench.benchmarks.milebench.containers:in_image"
"""What runs any of its commands in a family's image (``milebench --in-image FAMILY <command>``)."""


def add_commands(add_command: AddCommand) -> None:
    """Its commands, each of which ``--in-image`` runs in an image through :data:`IN_IMAGE`."""

    def add(
        name: str, target: str, help: str, *, made_by: tuple[str, ...] | None = None, listed: bool = True
    ) -> KitParser:
        p = add_command(name, target, help, made_by=made_by, listed=listed)
        p.set_defaults(in_image_runner=IN_IMAGE)
        return p

    p = add(
        "fixture",
        "milebench.benchmarks.milebench.fixture.commands:fixture",
        "Generate the mini-MileBench archives + lock.",
        made_by=(),
    )
    p.add_argument("--out", type=Path, required=True, help="Mirror folder to write archives and lock into.")
    p.add_argument("--seed", type=int, default=0, help="Seed of the generated samples.")
    p.add_argument("--samples-per-task", type=int, default=3, help="Samples in each task.")

    p = add(
        "lock-data",
        "milebench.benchmarks.milebench.data.hub_lock:lock",
        "Resolve the hub revision and archive checksums.",
        made_by=(),
    )
    p.add_argument("--repo-id", default="FreedomIntelligence/MileBench", help="The data's hub dataset.")
    p.add_argument("--revision", default="main", help="Branch, tag or commit to pin.")
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_SPECS / "locks" / "milebench-hub.lock.yaml",
        help="The lock to write (default: the kit's own, specs/locks/milebench-hub.lock.yaml).",
    )

    p = add(
        "validate-data",
        "milebench.benchmarks.milebench.data.validate:command",
        "Check a data tree against the task specs.",
        made_by=("milebench fetch",),
    )
    p.add_argument("data_root", type=Path, help="The extracted MileBench/ folder.")
    p.add_argument(
        "--samples-per-task",
        type=int,
        default=None,
        help="Expected count in every task (fixtures); default: each task spec's.",
    )

    p = add(
        "preprocess",
        "milebench.benchmarks.milebench.preprocess.commands:preprocess",
        "Build prompts for one task and mode.",
        made_by=("milebench fetch", "milebench tiny-model"),
    )
    job_args(p, model=False)
    p.add_argument(
        "--regime",
        default="full",
        help="Input regime id (see `milebench.benchmarks.milebench.preprocess.regime`).",
    )
    p.add_argument("--workers", type=int, default=1, help="Threads for combined-image tiling.")

    p = add(
        "score",
        "milebench.benchmarks.milebench.scoring:score",
        "Score one model's predictions for one task.",
        made_by=("milebench preprocess", OFFICIAL_CODE, "milebench fetch"),
    )
    job_args(p, model=True, task_required=False)
    _official_args(p, required=False)

    p = add(
        "show",
        "milebench.benchmarks.milebench.score.show:show",
        "Print a run's per-sample logs (prompt, images, answer, gold, judgment), filtered.",
        made_by=("milebench score",),
    )
    run_root_args(p)
    _show_args(p)

    p = add(
        "report",
        "milebench.benchmarks.milebench.report.commands:report",
        "Render the HTML and LaTeX report of a run.",
        made_by=("milebench score", "milebench aggregate"),
    )
    run_root_args(p)

    p = add(
        "aggregate",
        "milebench.benchmarks.milebench.score.run_aggregate:aggregate",
        "Write a run's aggregate and verdict JSON.",
        made_by=("milebench score",),
    )
    run_root_args(p)
    p.add_argument(
        "--resamples", type=bounded_int(1, MAX_RESAMPLES), default=2000, help="Bootstrap resamples."
    )
    seed_arg(p)

    p = add(
        "compare",
        "milebench.benchmarks.milebench.score.compare:compare_command",
        "Paired comparison of two models or runs.",
        made_by=("milebench score",),
    )
    run_args(p)
    p.add_argument("--model-a", required=True, help="Model A.")
    p.add_argument("--model-b", default=None, help="Defaults to --model-a (compare two runs).")
    p.add_argument("--run-b", default=None, help="Run of B; defaults to --run.")
    mode_arg(p)
    scorer_arg(p)
    p.add_argument(
        "--resamples", type=bounded_int(1, MAX_RESAMPLES), default=5000, help="Bootstrap resamples."
    )
    seed_arg(p)
    p.add_argument(
        "--out", type=Path, default=None, help="Also write the comparison as JSON here; default: not written."
    )

    p = add(
        "import-official",
        "milebench.benchmarks.milebench.scoring:import_official",
        "Import official pred.json files, or lmms-eval's or VLMEvalKit's prediction files.",
        made_by=(),
    )
    run_root_args(p)
    p.add_argument("--model", required=True, help="The run's model the predictions belong to.")
    p.add_argument(
        "--new-model",
        nargs="?",
        const="",
        default=None,
        metavar="DISPLAY_NAME",
        help="--model is a model the kit does not know: write its spec (section user, never run) into "
        "--specs (a folder of your own) and add it to the run there; DISPLAY_NAME defaults to --model. "
        "Default: off.",
    )
    mode_arg(p)
    _official_args(p, required=True)

    p = add(
        "fetch",
        "milebench.benchmarks.milebench.data.commands:fetch",
        "Download, verify and extract a run's data.",
        made_by=("milebench fixture", "milebench lock-data"),
    )
    run_root_args(p)
    p.add_argument(
        "--download-deadline",
        type=float,
        default=None,
        metavar="SECONDS",
        help="Most seconds one archive's download may take, retries included (default: scaled to its "
        "size); an unfinished download resumes on the next fetch.",
    )

    p = add(
        "fetch-weights",
        "milebench.benchmarks.milebench.data.commands:fetch_weights",
        "Download a model's url weight files into the weights cache and verify them.",
        made_by=(),
    )
    p.add_argument("--model", required=True, help="A model spec with url weights.")

    p = add(
        "lock-weights",
        "milebench.benchmarks.milebench.data.lock_weights:lock_weights",
        "Pin hub model revisions to commits and url weight files to their size and sha256.",
        made_by=(),
    )
    p.add_argument("--ref", default="main", help="Branch or tag to resolve.")
    p.add_argument(
        "--run",
        default=None,
        help="Pin only this run's models (the lock's other entries are kept); default: every model's.",
    )

    p = add(
        "tiny-model",
        "milebench.benchmarks.milebench.infer.commands:tiny_model",
        "Build a tiny random-weight model offline.",
        made_by=(),
    )
    run_root_args(p)
    p.add_argument("--model", required=True, help="A model of the run with tiny weights.")

    p = add(
        "infer",
        "milebench.benchmarks.milebench.infer.commands:infer",
        "Run one model over prepared tasks of one mode.",
        made_by=("milebench preprocess", "milebench tiny-model"),
    )
    job_args(p, model=True, many_tasks=True)
    threads_arg(p)

    p = add(
        "render-input",
        "milebench.benchmarks.milebench.infer.render_input:render_input",
        "Show what a model receives for one sample.",
        made_by=("milebench preprocess", "milebench tiny-model"),
    )
    job_args(p, model=True)
    p.add_argument("--sample", type=int, required=True, help="The sample_id.")

    p = add(
        "audit",
        "milebench.benchmarks.milebench.audit.commands:batch_command",
        "Determinism and drift audit of a model.",
    )
    audit = subcommands(p, "audit_command")
    p = audit(
        "batch",
        "milebench.benchmarks.milebench.audit.commands:batch_command",
        "Batch size 1 against shuffled larger batches and repeated runs.",
        made_by=("milebench preprocess", "milebench tiny-model"),
    )
    run_root_args(p)
    p.add_argument("--model", required=True, help="The run's model to audit.")
    p.add_argument("--task", required=True, action="append", help="A task to audit (repeatable).")
    mode_arg(p)
    p.add_argument(
        "--variant",
        default=None,
        help="Execution variant instead of the run's (e.g. batched); default: the run's.",
    )
    p.add_argument(
        "--batch-sizes",
        type=bounded_ints(1, MAX_BATCH_SIZE),
        default=(1, 4),
        help=f"Comma-separated, e.g. 1,4,8, each from 1 to {MAX_BATCH_SIZE}; default 1,4.",
    )
    p.add_argument(
        "--repeats", type=bounded_int(1, MAX_REPEATS), default=2, help="Shuffled runs per batch size."
    )
    p.add_argument("--tie-margin", type=float, default=0.05, help="Near-tie below this top-1/top-2 margin.")
    scorer_arg(p)
    seed_arg(p)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default: reports/<run>/audit/).")
    p.add_argument("--gpus", default=None, help='With --in-image: "all" or device ids (default: none).')
    p = audit(
        "drift",
        "milebench.benchmarks.milebench.audit.commands:drift_command",
        "Score deltas and flips between two environments or backends.",
        made_by=("milebench score",),
    )
    run_root_args(p)
    p.add_argument("--model-a", required=True, help="Model A.")
    p.add_argument("--model-b", default=None, help="Defaults to --model-a.")
    p.add_argument("--run-b", default=None, help="Run of B; defaults to --run.")
    p.add_argument(
        "--root-b", type=Path, default=None, help="Folder B's run is laid out under; defaults to --root."
    )
    mode_arg(p)
    scorer_arg(p)
    p.add_argument(
        "--resamples", type=bounded_int(1, MAX_RESAMPLES), default=5000, help="Bootstrap resamples."
    )
    seed_arg(p)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default: reports/<run>/audit/).")

    p = add(
        "container-infer",
        "milebench.benchmarks.milebench.containers:container_infer",
        "Run `infer` in its image.",
        made_by=("milebench preprocess", "milebench image build"),
        listed=False,  # the infer rule's form under deployment docker
    )
    job_args(p, model=True, many_tasks=True)
    threads_arg(p)
    p.add_argument("--runtime", choices=["local", "docker"], default="docker", help="Where the image runs.")
    p.add_argument("--gpus", default=None, help='"all" or comma-separated device ids (default: none).')
    p.add_argument("--api-network", default="bridge", help="Docker network of API models (others: none).")
