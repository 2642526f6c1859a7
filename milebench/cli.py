"""The ``milebench`` command: one subcommand per stage, so each Snakemake rule is one command.

Handlers are imported only when their subcommand runs, so ``milebench score`` never pays for torch.
``milebench --help`` lists the commands in groups (each installed benchmark's in its own); the commands
only rules call are left out of it, and still run.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from milebench.errors import KitError
from milebench.records import FailureKind
from milebench.spec.base import SpecError
from milebench.spec.benchmark import benchmarks
from milebench.spec.names import UnknownName
from milebench.spec.registry import DEFAULT_SPECS, limit_runs
from milebench.spec.run import MAX_BATCH_SIZE, MAX_REPEATS, MAX_RESAMPLES, Mode

log = logging.getLogger("milebench")

SPECS_HELP = "Specs folder; one of your own overlays the kit's (default: the kit's own, specs/)."
EXAMPLES = """\
examples:
  milebench check-specs --specs my-specs        # your specs, over the kit's
  milebench render-input --run smoke --model tiny-llava --task ActionSequence \\
      --mode multi-image --sample 0             # what a model receives, one sample
  milebench import-official --run paper --model llava-1.5-7b \\
      --official-outputs outputs/llava-v1.5-7b --report   # score the official code's outputs
  milebench verify R.tar --expect-id ID         # someone else's bundle, offline
  milebench COMMAND --help                      # a command's options, with their defaults

A whole run is one Snakemake command, which runs these stages for you:
  snakemake --cores all --config run=smoke
"""
COMMAND_GROUPS = {
    "run": "Specs, and a run's stages by hand (Snakemake runs them for you).",
    "score and import": "Judge predictions, yours or the official code's; aggregate and compare.",
    "report": "Tables and figures from existing scores.",
    "data": "Data and weights: fetch, lock, validate; the mini-MileBench and tiny checkpoints.",
    "containers and archive": "The model families' images; artifact bundles and their verification.",
}
"""The headings of ``milebench --help``, in order; each installed benchmark's commands follow under its
own heading."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """States every option's default after its help, unless the help already says it: a flag is off, a
    list empty is none, a default of None has no value to show (its help says what happens without it).
    The description and epilog keep their line breaks (the examples)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or action.required
            or default is None
            or default is argparse.SUPPRESS
            or "default" in text.lower()
        ):
            return action.help
        if default is False:
            shown = "off"
        elif isinstance(default, list | tuple):
            shown = ",".join(map(str, default)) or "none"
        else:
            shown = str(default)
        return f"{text} (default: {shown.replace('%', '%%')})".lstrip()


class KitParser(argparse.ArgumentParser):
    """An unknown command is answered with the commands ``--help`` lists, not the ones only rules call."""

    listed: list[str]

    def _check_value(self, action: argparse.Action, value: object) -> None:
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            names = ", ".join(self.listed)
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {names})")
        super()._check_value(action, value)


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", default="smoke", help="Run spec name (specs/runs/<name>.yaml).")


def _root_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        help="Folder the run's files are laid out under (results/<run>/, reports/<run>/); default: the "
        "working folder. Snakemake passes each job's own: its staged copy under a storage provider.",
    )


def _run_root_args(p: argparse.ArgumentParser) -> None:
    """--run and --root: the run and the folder its files lie under, as every stage of a run takes."""
    _run_args(p)
    _root_arg(p)


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type for a whole number from ``low`` to ``high``: the same bounds a run spec's audit
    section has, so a command line cannot ask for what a spec may not."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value}: from {low} to {high}")
        return value

    return parse


def bounded_ints(low: int, high: int) -> Callable[[str], tuple[int, ...]]:
    """An argparse type for comma-separated whole numbers (``1,4,8``), each from ``low`` to ``high``."""
    each = bounded_int(low, high)

    def parse(text: str) -> tuple[int, ...]:
        return tuple(each(part) for part in text.split(","))

    return parse


def _seed_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="Seed of the random draws (bootstrap, shuffles).")


def _scorer_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scorer", default="paper", help="Scorer whose judgments are compared.")


def _mode_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", type=Mode, choices=list(Mode), default=Mode.MULTI_IMAGE, help="The mode.")


def _threads_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="The job's CPU threads: from 2 on, one builds the next inputs in a worker process and the "
        "rest go to the model's libraries; default: all cores to the model, inputs built in line.",
    )


def _job_args(
    p: argparse.ArgumentParser, model: bool, task_required: bool = True, many_tasks: bool = False
) -> None:
    _run_root_args(p)
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


def build_parser() -> argparse.ArgumentParser:
    parser = KitParser(
        prog="milebench",
        description="The MileBench reproducibility kit: one command per stage of a run.",
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--specs", type=Path, default=DEFAULT_SPECS, help=SPECS_HELP)
    parser.add_argument("-v", "--verbose", action="store_true", help="Log debug lines too.")
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help="At most N samples per task and mode, the same ones every time (replaces the run spec's "
        "limit; a subset gets no verdict against the paper). Default: the run spec's.",
    )
    parser.add_argument(
        "--in-image",
        metavar="FAMILY",
        default=None,
        help="Run the stage command in this family's Docker image (recorded by `milebench image build`) "
        "instead of this process: --config docker_jobs=all. Default: in this process.",
    )
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="One of the commands below; `milebench COMMAND --help` lists its options.",
    )
    groups = {title: parser.add_argument_group(title, text) for title, text in COMMAND_GROUPS.items()}
    parser.listed = []

    def add(
        name: str, target: str, help: str, group: argparse._ArgumentGroup | None
    ) -> argparse.ArgumentParser:
        """A command listed under ``group`` in ``milebench --help``; None: one only rules call, left out
        of the listing (argparse lists a command only when ``help`` is passed to ``add_parser``)."""
        p = sub.add_parser(name, description=help, formatter_class=HelpFormatter)
        if group is not None:
            group._group_actions.append(argparse.Action([], dest=name, help=help))
            parser.listed.append(name)
        p.add_argument("--specs", type=Path, default=argparse.SUPPRESS, help=SPECS_HELP)
        p.set_defaults(target=target)
        return p

    def nested(p: argparse.ArgumentParser, dest: str) -> Callable[[str, str, str], argparse.ArgumentParser]:
        """``add`` for the subcommands of a command (``image build``), listed in its own help."""
        commands = p.add_subparsers(dest=dest, required=True)

        def add_nested(name: str, target: str, help: str) -> argparse.ArgumentParser:
            q = commands.add_parser(name, help=help, description=help, formatter_class=HelpFormatter)
            q.set_defaults(target=target)
            return q

        return add_nested

    run, scoring, report, data, archive = groups.values()
    add(
        "check-specs",
        "milebench.commands.specs:check",
        "Validate every spec and their cross references.",
        run,
    )
    p = add(
        "export-schemas", "milebench.commands.specs:export", "Write JSON Schemas of the spec models.", run
    )
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_SPECS / "schemas",
        help="Folder to write them into (default: the kit's own, specs/schemas).",
    )

    p = add(
        "fixture",
        "milebench.benchmarks.milebench.fixture.commands:fixture",
        "Generate the mini-MileBench archives + lock.",
        data,
    )
    p.add_argument("--out", type=Path, required=True, help="Mirror folder to write archives and lock into.")
    p.add_argument("--seed", type=int, default=0, help="Seed of the generated samples.")
    p.add_argument("--samples-per-task", type=int, default=3, help="Samples in each task.")

    p = add("fetch", "milebench.data.commands:fetch", "Download, verify and extract a run's data.", data)
    _run_root_args(p)
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
        "milebench.data.commands:fetch_weights",
        "Download a model's url weight files into the weights cache and verify them.",
        data,
    )
    p.add_argument("--model", required=True, help="A model spec with url weights.")

    p = add(
        "lock-data", "milebench.data.commands:lock", "Resolve the hub revision and archive checksums.", data
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
        "lock-weights",
        "milebench.data.lock_weights:lock_weights",
        "Pin hub model revisions to commits and url weight files to their size and sha256.",
        data,
    )
    p.add_argument("--ref", default="main", help="Branch or tag to resolve.")
    p.add_argument(
        "--run",
        default=None,
        help="Pin only this run's models (the lock's other entries are kept); default: every model's.",
    )

    p = add(
        "validate-data",
        "milebench.benchmarks.milebench.data.validate:command",
        "Check a data tree against the task specs.",
        data,
    )
    p.add_argument("data_root", type=Path, help="The extracted MileBench/ folder.")
    p.add_argument(
        "--samples-per-task",
        type=int,
        default=None,
        help="Expected count in every task (fixtures); default: each task spec's.",
    )

    p = add(
        "tiny-model", "milebench.infer.commands:tiny_model", "Build a tiny random-weight model offline.", data
    )
    _run_root_args(p)
    p.add_argument("--model", required=True, help="A model of the run with tiny weights.")

    p = add(
        "preprocess",
        "milebench.benchmarks.milebench.preprocess.commands:preprocess",
        "Build prompts for one task and mode.",
        run,
    )
    _job_args(p, model=False)
    p.add_argument("--regime", default="full", help="Input regime id (see `milebench.preprocess.regime`).")
    p.add_argument("--workers", type=int, default=1, help="Threads for combined-image tiling.")

    p = add("infer", "milebench.infer.commands:infer", "Run one model over prepared tasks of one mode.", run)
    _job_args(p, model=True, many_tasks=True)
    _threads_arg(p)

    p = add(
        "render-input",
        "milebench.infer.render_input:render_input",
        "Show what a model receives for one sample.",
        run,
    )
    _job_args(p, model=True)
    p.add_argument("--sample", type=int, required=True, help="The sample_id.")

    p = add(
        "score",
        "milebench.benchmarks.milebench.scoring:score",
        "Score one model's predictions for one task.",
        scoring,
    )
    _job_args(p, model=True, task_required=False)
    _official_args(p, required=False)

    p = add(
        "show",
        "milebench.benchmarks.milebench.score.show:show",
        "Print a run's per-sample logs (prompt, images, answer, gold, judgment), filtered.",
        scoring,
    )
    _run_root_args(p)
    _show_args(p)

    p = add(
        "report",
        "milebench.benchmarks.milebench.report.commands:report",
        "Render the HTML and LaTeX report of a run.",
        report,
    )
    _run_root_args(p)

    p = add(
        "aggregate",
        "milebench.score.run_aggregate:aggregate",
        "Write a run's aggregate and verdict JSON.",
        scoring,
    )
    _run_root_args(p)
    p.add_argument(
        "--resamples", type=bounded_int(1, MAX_RESAMPLES), default=2000, help="Bootstrap resamples."
    )
    _seed_arg(p)

    p = add(
        "compare",
        "milebench.benchmarks.milebench.score.compare:compare_command",
        "Paired comparison of two models or runs.",
        scoring,
    )
    _run_args(p)
    p.add_argument("--model-a", required=True, help="Model A.")
    p.add_argument("--model-b", default=None, help="Defaults to --model-a (compare two runs).")
    p.add_argument("--run-b", default=None, help="Run of B; defaults to --run.")
    _mode_arg(p)
    _scorer_arg(p)
    p.add_argument(
        "--resamples", type=bounded_int(1, MAX_RESAMPLES), default=5000, help="Bootstrap resamples."
    )
    _seed_arg(p)
    p.add_argument(
        "--out", type=Path, default=None, help="Also write the comparison as JSON here; default: not written."
    )

    p = add("audit", "milebench.audit.commands:batch_command", "Determinism and drift audit of a model.", run)
    audit = nested(p, "audit_command")
    p = audit(
        "batch",
        "milebench.audit.commands:batch_command",
        "Batch size 1 against shuffled larger batches and repeated runs.",
    )
    _run_root_args(p)
    p.add_argument("--model", required=True, help="The run's model to audit.")
    p.add_argument("--task", required=True, action="append", help="A task to audit (repeatable).")
    _mode_arg(p)
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
    _scorer_arg(p)
    _seed_arg(p)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default: reports/<run>/audit/).")
    p.add_argument("--gpus", default=None, help='With --in-image: "all" or device ids (default: none).')
    p = audit(
        "drift",
        "milebench.audit.commands:drift_command",
        "Score deltas and flips between two environments or backends.",
    )
    _run_root_args(p)
    p.add_argument("--model-a", required=True, help="Model A.")
    p.add_argument("--model-b", default=None, help="Defaults to --model-a.")
    p.add_argument("--run-b", default=None, help="Run of B; defaults to --run.")
    p.add_argument(
        "--root-b", type=Path, default=None, help="Folder B's run is laid out under; defaults to --root."
    )
    _mode_arg(p)
    _scorer_arg(p)
    p.add_argument(
        "--resamples", type=bounded_int(1, MAX_RESAMPLES), default=5000, help="Bootstrap resamples."
    )
    _seed_arg(p)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default: reports/<run>/audit/).")

    p = add(
        "import-official",
        "milebench.benchmarks.milebench.scoring:import_official",
        "Import official pred.json files, or lmms-eval's or VLMEvalKit's prediction files.",
        scoring,
    )
    _run_root_args(p)
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
    _mode_arg(p)
    _official_args(p, required=True)

    p = add(
        "image",
        "milebench.containers.commands:image_build",
        "Container images of the model families.",
        archive,
    )
    image = nested(p, "image_command")
    p = image(
        "build",
        "milebench.containers.commands:image_build",
        "Build containers/<family> and record it in results/images/.",
    )
    p.add_argument("--family", required=True, help="A folder under containers/ (kit, api, hf-current, ...).")
    p.add_argument(
        "--base", default=None, help="Base image instead of the Dockerfile's pinned BASE; default: that one."
    )
    p.add_argument(
        "--ca-bundle", type=Path, default=None, help="Extra CA certificates (PEM) to trust; default: none."
    )

    p = image(
        "prune",
        "milebench.containers.commands:image_prune",
        "Remove the family images no record in results/images/ names.",
    )
    p.add_argument(
        "--records",
        type=Path,
        action="append",
        help="A folder of image records whose images are kept (repeatable; default: results/images).",
    )
    p.add_argument("--dry-run", action="store_true", help="List what would be removed; remove nothing.")

    p = image(
        "uri",
        "milebench.containers.commands:image_uri",
        "Print the registry reference deployment apptainer pulls for a family.",
    )
    p.add_argument("--family", required=True, help="A folder under containers/.")
    p.add_argument("--registry", required=True, help="e.g. docker://ghcr.io/<org>/milebench")

    p = add(
        "archive",
        "milebench.archive.commands:archive",
        "Pack a finished run into an artifact bundle.",
        archive,
    )
    _run_root_args(p)
    p.add_argument("--out", type=Path, required=True, help="The bundle folder to create (must not exist).")
    p.add_argument(
        "--with-data", action="store_true", help="Add the data archives, verified against the lock."
    )
    p.add_argument("--with-weights", action="store_true", help="Add tiny checkpoints and pinned hub weights.")
    p.add_argument("--no-images", action="store_true", help="Leave the images (and SBOMs) out: hashes only.")
    p.add_argument("--tarball", action="store_true", help="Also write <out>.tar, byte-reproducible.")

    p = add("verify", "milebench.archive.commands:verify", "Re-check an artifact bundle offline.", archive)
    p.add_argument("bundle", type=Path, help="A bundle made by `milebench archive`: its folder or tarball.")
    p.add_argument(
        "--only",
        default=None,
        help="Comma-separated checks: hashes,images,rescore,report,rerun; default: all of them.",
    )
    p.add_argument(
        "--rerun",
        action="append",
        default=[],
        metavar="MODEL/MODE/TASK",
        help="A cell to re-run (repeatable; default: --rerun-per-model drawn cells).",
    )
    p.add_argument("--rerun-per-model", type=int, default=1, help="Cells drawn per model without --rerun.")
    p.add_argument("--seed", type=int, default=0, help="Seed of the drawn cells.")
    p.add_argument("--gpus", default=None, help='GPUs for re-run cells: "all" or device ids (default: none).')
    p.add_argument(
        "--summary",
        type=Path,
        default=None,
        help="Also write the evaluator's summary here; default: not written.",
    )
    p.add_argument(
        "--expect-id",
        default=None,
        help="Refuse a bundle whose id (manifest sha256) differs; default: any id.",
    )

    p = add(
        "container-infer",
        "milebench.containers.commands:container_infer",
        "Run `infer` in its image.",
        None,  # the infer rule's form under deployment docker
    )
    _job_args(p, model=True, many_tasks=True)
    _threads_arg(p)
    p.add_argument("--runtime", choices=["local", "docker"], default="docker", help="Where the image runs.")
    p.add_argument("--gpus", default=None, help='"all" or comma-separated device ids (default: none).')
    p.add_argument("--api-network", default="bridge", help="Docker network of API models (others: none).")
    for benchmark in benchmarks().values():  # each installed benchmark adds its own commands, in its group
        if benchmark.commands is not None:
            module, function = benchmark.commands.split(":")
            own = parser.add_argument_group(benchmark.title or benchmark.name)
            getattr(importlib.import_module(module), function)(partial(add, group=own), _root_arg)
    return parser


def subcommand_argv(argv: Sequence[str], verbose: bool, limit: int | None = None) -> list[str]:
    """The subcommand and its options, without the global options before it (``-v`` and ``--limit``
    kept: the stage in the image must see the same run)."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 1 if argv[i] in ("-v", "--verbose") or "=" in argv[i] else 2
    kept = (["-v"] if verbose else []) + ([] if limit is None else ["--limit", str(limit)])
    return kept + list(argv[i:])


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser()
    except KitError as err:  # an installed benchmark's declaration, before any option is read
        logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
        log.error("%s", err)
        return err.exit_status
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.limit is not None and args.limit < 1:
        log.error("argument --limit: must be 1 or more, not %d", args.limit)
        return 2
    limit_runs(args.limit)
    module_name, func_name = args.target.split(":")
    handler = getattr(importlib.import_module(module_name), func_name)
    try:
        if args.in_image is not None:
            from milebench.containers.commands import in_image

            return in_image(args, subcommand_argv(argv, args.verbose, args.limit))
        return int(handler(args) or 0)
    except UnknownName as err:  # a name typed on the command line, not a spec file's fault
        log.error("argument %s: %s", err.argument, err.problem)
        return 2
    except SpecError as err:
        log.error("invalid spec\n%s", err)
        return 2
    except KitError as err:
        log.error("%s", err)
        return err.exit_status


if __name__ == "__main__":
    sys.exit(main())
