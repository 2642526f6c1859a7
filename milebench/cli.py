"""The ``milebench`` command: one subcommand per stage, so each Snakemake rule is one command.

Handlers are imported only when their subcommand runs, so ``milebench score`` never pays for torch.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from milebench.errors import KitError
from milebench.records import FailureKind
from milebench.spec.base import SpecError
from milebench.spec.benchmark import benchmarks
from milebench.spec.names import UnknownName
from milebench.spec.registry import DEFAULT_SPECS, limit_runs
from milebench.spec.run import MAX_BATCH_SIZE, MAX_REPEATS, MAX_RESAMPLES, Mode

log = logging.getLogger("milebench")


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
    _run_args(p)
    _root_arg(p)
    if model:
        p.add_argument("--model", required=True)
    if many_tasks:
        p.add_argument(
            "--task",
            action="append",
            required=True,
            help="A task; repeat it to answer several, loading once.",
        )
    else:
        p.add_argument("--task", required=task_required)
    p.add_argument("--mode", required=True, type=Mode, choices=list(Mode))


IMPORT_FORMATS = ("official", "lmms-eval", "vlmevalkit")
"""The prediction files ``--format`` reads (``milebench.score.foreign.FORMATS``; named here so that the
parser imports no scoring code)."""


def _official_args(p: argparse.ArgumentParser, required: bool) -> None:
    help_text = (
        "The folder of one model's predictions: the official outputs/<model>/ of <Task>/pred.json files, "
        "lmms-eval's <output_path>/<model>/ of samples files, or VLMEvalKit's work dir (see --format)."
    )
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
    parser = argparse.ArgumentParser(prog="milebench", description=__doc__.splitlines()[0])
    parser.add_argument("--specs", type=Path, default=DEFAULT_SPECS, help="Specs folder.")
    parser.add_argument("-v", "--verbose", action="store_true")
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
        "instead of this process: run spec docker_jobs: all.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, target: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--specs", type=Path, default=argparse.SUPPRESS, help="Specs folder.")
        p.set_defaults(target=target)
        return p

    add("check-specs", "milebench.commands.specs:check", "Validate every spec and their cross references.")
    p = add("export-schemas", "milebench.commands.specs:export", "Write JSON Schemas of the spec models.")
    p.add_argument("--out", type=Path, default=DEFAULT_SPECS / "schemas")

    p = add("fixture", "milebench.fixture.commands:fixture", "Generate the mini-MileBench archives + lock.")
    p.add_argument("--out", type=Path, required=True, help="Mirror folder to write archives and lock into.")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples-per-task", type=int, default=3)

    p = add("fetch", "milebench.data.commands:fetch", "Download, verify and extract a run's data.")
    _run_args(p)
    _root_arg(p)
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
    )
    p.add_argument("--model", required=True, help="A model spec with url weights.")

    p = add("lock-data", "milebench.data.commands:lock", "Resolve the hub revision and archive checksums.")
    p.add_argument("--repo-id", default="FreedomIntelligence/MileBench")
    p.add_argument("--revision", default="main")
    p.add_argument("--out", type=Path, default=DEFAULT_SPECS / "locks" / "milebench-hub.lock.yaml")

    p = add(
        "lock-weights",
        "milebench.data.lock_weights:lock_weights",
        "Pin hub model revisions to commits and url weight files to their size and sha256.",
    )
    p.add_argument("--ref", default="main", help="Branch or tag to resolve.")
    p.add_argument(
        "--run", default=None, help="Pin only this run's models (the lock's other entries are kept)."
    )

    p = add("validate-data", "milebench.data.validate:command", "Check a data tree against the task specs.")
    p.add_argument("data_root", type=Path, help="The extracted MileBench/ folder.")
    p.add_argument("--samples-per-task", type=int, default=None, help="Expected count (fixtures).")

    p = add("tiny-model", "milebench.infer.commands:tiny_model", "Build a tiny random-weight model offline.")
    _run_args(p)
    _root_arg(p)
    p.add_argument("--model", required=True)

    p = add("preprocess", "milebench.preprocess.commands:preprocess", "Build prompts for one task and mode.")
    _job_args(p, model=False)
    p.add_argument("--regime", default="full", help="Input regime id (see `milebench.preprocess.regime`).")
    p.add_argument("--workers", type=int, default=1, help="Threads for combined-image tiling.")

    p = add("infer", "milebench.infer.commands:infer", "Run one model over prepared tasks of one mode.")
    _job_args(p, model=True, many_tasks=True)
    _threads_arg(p)

    p = add(
        "render-input",
        "milebench.infer.render_input:render_input",
        "Show what a model receives for one sample.",
    )
    _job_args(p, model=True)
    p.add_argument("--sample", type=int, required=True, help="The sample_id.")

    p = add("score", "milebench.commands.scoring:score", "Score one model's predictions for one task.")
    _job_args(p, model=True, task_required=False)
    _official_args(p, required=False)

    p = add(
        "show",
        "milebench.score.show:show",
        "Print a run's per-sample logs (prompt, images, answer, gold, judgment), filtered.",
    )
    _run_args(p)
    _root_arg(p)
    _show_args(p)

    p = add("report", "milebench.report.commands:report", "Render the HTML and LaTeX report of a run.")
    _run_args(p)
    _root_arg(p)

    p = add(
        "aggregate", "milebench.score.run_aggregate:aggregate", "Write a run's aggregate and verdict JSON."
    )
    _run_args(p)
    _root_arg(p)
    p.add_argument(
        "--resamples", type=bounded_int(1, MAX_RESAMPLES), default=2000, help="Bootstrap resamples."
    )
    p.add_argument("--seed", type=int, default=0)

    p = add("compare", "milebench.score.compare:compare_command", "Paired comparison of two models or runs.")
    _run_args(p)
    p.add_argument("--model-a", required=True)
    p.add_argument("--model-b", default=None, help="Defaults to --model-a (compare two runs).")
    p.add_argument("--run-b", default=None, help="Run of B; defaults to --run.")
    p.add_argument("--mode", type=Mode, choices=list(Mode), default=Mode.MULTI_IMAGE)
    p.add_argument("--scorer", default="paper")
    p.add_argument("--resamples", type=bounded_int(1, MAX_RESAMPLES), default=5000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="Also write the comparison as JSON here.")

    p = add("audit", "milebench.audit.commands:batch_command", "Determinism and drift audit of a model.")
    audit = p.add_subparsers(dest="audit_command", required=True)
    p = audit.add_parser("batch", help="Batch size 1 against shuffled larger batches and repeated runs.")
    p.set_defaults(target="milebench.audit.commands:batch_command")
    _run_args(p)
    _root_arg(p)
    p.add_argument("--model", required=True)
    p.add_argument("--task", required=True, action="append", help="A task to audit (repeatable).")
    p.add_argument("--mode", type=Mode, choices=list(Mode), default=Mode.MULTI_IMAGE)
    p.add_argument("--variant", default=None, help="Execution variant instead of the run's (e.g. batched).")
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
    p.add_argument("--scorer", default="paper")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default: reports/<run>/audit/).")
    p.add_argument("--gpus", default=None, help='With --in-image: "all" or device ids (default: none).')
    p = audit.add_parser("drift", help="Score deltas and flips between two environments or backends.")
    p.set_defaults(target="milebench.audit.commands:drift_command")
    _run_args(p)
    _root_arg(p)
    p.add_argument("--model-a", required=True)
    p.add_argument("--model-b", default=None, help="Defaults to --model-a.")
    p.add_argument("--run-b", default=None, help="Run of B; defaults to --run.")
    p.add_argument("--root-b", type=Path, default=None, help="Folder B's run is laid out under.")
    p.add_argument("--mode", type=Mode, choices=list(Mode), default=Mode.MULTI_IMAGE)
    p.add_argument("--scorer", default="paper")
    p.add_argument("--resamples", type=bounded_int(1, MAX_RESAMPLES), default=5000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default: reports/<run>/audit/).")

    p = add(
        "import-official",
        "milebench.commands.scoring:import_official",
        "Import official pred.json files, or lmms-eval's or VLMEvalKit's prediction files.",
    )
    _run_args(p)
    _root_arg(p)
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
    p.add_argument("--mode", type=Mode, choices=list(Mode), default=Mode.MULTI_IMAGE)
    _official_args(p, required=True)

    p = add("image", "milebench.containers.commands:image_build", "Container images of the model families.")
    image = p.add_subparsers(dest="image_command", required=True)
    p = image.add_parser("build", help="Build containers/<family> and record it in results/images/.")
    p.set_defaults(target="milebench.containers.commands:image_build")
    p.add_argument("--family", required=True, help="A folder under containers/ (kit, api, hf-current, ...).")
    p.add_argument("--base", default=None, help="Base image instead of the Dockerfile's pinned BASE.")
    p.add_argument("--ca-bundle", type=Path, default=None, help="Extra CA certificates (PEM) to trust.")

    p = image.add_parser("prune", help="Remove the family images no record in results/images/ names.")
    p.set_defaults(target="milebench.containers.commands:image_prune")
    p.add_argument(
        "--records",
        type=Path,
        action="append",
        help="A folder of image records whose images are kept (repeatable; default: results/images).",
    )
    p.add_argument("--dry-run", action="store_true", help="List what would be removed; remove nothing.")

    p = image.add_parser("uri", help="Print the registry reference runtime apptainer pulls for a family.")
    p.set_defaults(target="milebench.containers.commands:image_uri")
    p.add_argument("--family", required=True)
    p.add_argument("--registry", required=True, help="e.g. docker://ghcr.io/<org>/milebench")

    p = add("archive", "milebench.archive.commands:archive", "Pack a finished run into an artifact bundle.")
    _run_args(p)
    _root_arg(p)
    p.add_argument("--out", type=Path, required=True, help="The bundle folder to create (must not exist).")
    p.add_argument(
        "--with-data", action="store_true", help="Add the data archives, verified against the lock."
    )
    p.add_argument("--with-weights", action="store_true", help="Add tiny checkpoints and pinned hub weights.")
    p.add_argument("--no-images", action="store_true", help="Leave the images (and SBOMs) out: hashes only.")
    p.add_argument("--tarball", action="store_true", help="Also write <out>.tar, byte-reproducible.")

    p = add("verify", "milebench.archive.commands:verify", "Re-check an artifact bundle offline.")
    p.add_argument("bundle", type=Path, help="A bundle made by `milebench archive`: its folder or tarball.")
    p.add_argument("--only", default=None, help="Comma-separated checks: hashes,images,rescore,report,rerun.")
    p.add_argument(
        "--rerun", action="append", default=[], metavar="MODEL/MODE/TASK", help="A cell to re-run."
    )
    p.add_argument("--rerun-per-model", type=int, default=1, help="Cells drawn per model without --rerun.")
    p.add_argument("--seed", type=int, default=0, help="Seed of the drawn cells.")
    p.add_argument("--gpus", default=None, help='GPUs for re-run cells: "all" or device ids (default: none).')
    p.add_argument("--summary", type=Path, default=None, help="Also write the evaluator's summary here.")
    p.add_argument("--expect-id", default=None, help="Refuse a bundle whose id (manifest sha256) differs.")

    p = add("container-infer", "milebench.containers.commands:container_infer", "Run `infer` in its image.")
    _job_args(p, model=True, many_tasks=True)
    _threads_arg(p)
    p.add_argument("--runtime", choices=["local", "docker"], default="docker")
    p.add_argument("--gpus", default=None, help='"all" or comma-separated device ids (default: none).')
    p.add_argument("--api-network", default="bridge", help="Docker network of API models (others: none).")
    for benchmark in benchmarks().values():  # each installed benchmark adds its own commands
        if benchmark.commands is not None:
            module, function = benchmark.commands.split(":")
            getattr(importlib.import_module(module), function)(add, _root_arg)
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
