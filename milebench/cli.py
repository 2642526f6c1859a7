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
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from milebench.arguments import (
    AddCommand,
    bounded_int,
    bounded_ints,
    job_args,
    mode_arg,
    run_root_args,
    scorer_arg,
    seed_arg,
    threads_arg,
)
from milebench.errors import KitError
from milebench.spec.base import SpecError
from milebench.spec.benchmark import benchmarks
from milebench.spec.names import UnknownName
from milebench.spec.registry import DEFAULT_SPECS, limit_runs
from milebench.spec.run import MAX_BATCH_SIZE, MAX_REPEATS, MAX_RESAMPLES

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
    "data": "Data and weights: fetch and lock; tiny checkpoints.",
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
    made_by: tuple[str, ...] | None = None
    """The commands that make the stage inputs this command reads (``AddCommand``); None: undeclared."""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            names = ", ".join(self.listed)
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {names})")
        super()._check_value(action, value)


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
        name: str,
        target: str,
        help: str,
        group: argparse._ArgumentGroup | None,
        *,
        made_by: tuple[str, ...] | None = None,
    ) -> KitParser:
        """A command listed under ``group`` in ``milebench --help``; None: one only rules call, left out
        of the listing (argparse lists a command only when ``help`` is passed to ``add_parser``)."""
        p = sub.add_parser(name, description=help, formatter_class=HelpFormatter)
        p.made_by = made_by
        if group is not None:
            group._group_actions.append(argparse.Action([], dest=name, help=help))
            parser.listed.append(name)
        p.add_argument("--specs", type=Path, default=argparse.SUPPRESS, help=SPECS_HELP)
        p.set_defaults(target=target)
        return p

    def nested(p: KitParser, dest: str) -> AddCommand:
        """``add`` for the subcommands of a command (``image build``), listed in its own help."""
        commands = p.add_subparsers(dest=dest, required=True)

        def add_nested(
            name: str, target: str, help: str, *, made_by: tuple[str, ...] | None = None
        ) -> argparse.ArgumentParser:
            q = commands.add_parser(name, help=help, description=help, formatter_class=HelpFormatter)
            q.made_by = made_by
            q.set_defaults(target=target)
            return q

        return add_nested

    run, data, archive = groups.values()
    add(
        "check-specs",
        "milebench.commands.specs:check",
        "Validate every spec and their cross references.",
        run,
        made_by=(),
    )
    p: argparse.ArgumentParser = add(
        "export-schemas",
        "milebench.commands.specs:export",
        "Write JSON Schemas of the spec models.",
        run,
        made_by=(),
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="Folder to write them into, a folder per benchmark (default: each benchmark's own shipped "
        "specs folder's schemas/, specs/schemas for MileBench).",
    )

    p = add(
        "fetch",
        "milebench.data.commands:fetch",
        "Download, verify and extract a run's data.",
        data,
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
        "milebench.data.commands:fetch_weights",
        "Download a model's url weight files into the weights cache and verify them.",
        data,
        made_by=(),
    )
    p.add_argument("--model", required=True, help="A model spec with url weights.")

    p = add(
        "lock-weights",
        "milebench.data.lock_weights:lock_weights",
        "Pin hub model revisions to commits and url weight files to their size and sha256.",
        data,
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
        "milebench.infer.commands:tiny_model",
        "Build a tiny random-weight model offline.",
        data,
        made_by=(),
    )
    run_root_args(p)
    p.add_argument("--model", required=True, help="A model of the run with tiny weights.")

    p = add(
        "infer",
        "milebench.infer.commands:infer",
        "Run one model over prepared tasks of one mode.",
        run,
        made_by=("milebench preprocess", "milebench tiny-model"),
    )
    job_args(p, model=True, many_tasks=True)
    threads_arg(p)

    p = add(
        "render-input",
        "milebench.infer.render_input:render_input",
        "Show what a model receives for one sample.",
        run,
        made_by=("milebench preprocess", "milebench tiny-model"),
    )
    job_args(p, model=True)
    p.add_argument("--sample", type=int, required=True, help="The sample_id.")

    p = add("audit", "milebench.audit.commands:batch_command", "Determinism and drift audit of a model.", run)
    audit = nested(p, "audit_command")
    p = audit(
        "batch",
        "milebench.audit.commands:batch_command",
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
        "milebench.audit.commands:drift_command",
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
        made_by=(),
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
        made_by=(),
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
        made_by=(),
    )
    p.add_argument("--family", required=True, help="A folder under containers/.")
    p.add_argument("--registry", required=True, help="e.g. docker://ghcr.io/<org>/milebench")

    p = add(
        "archive",
        "milebench.archive.commands:archive",
        "Pack a finished run into an artifact bundle.",
        archive,
        made_by=("milebench report",),
    )
    run_root_args(p)
    p.add_argument("--out", type=Path, required=True, help="The bundle folder to create (must not exist).")
    p.add_argument(
        "--with-data", action="store_true", help="Add the data archives, verified against the lock."
    )
    p.add_argument("--with-weights", action="store_true", help="Add tiny checkpoints and pinned hub weights.")
    p.add_argument("--no-images", action="store_true", help="Leave the images (and SBOMs) out: hashes only.")
    p.add_argument("--tarball", action="store_true", help="Also write <out>.tar, byte-reproducible.")

    p = add(
        "verify",
        "milebench.archive.commands:verify",
        "Re-check an artifact bundle offline.",
        archive,
        made_by=("milebench archive",),
    )
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
        made_by=("milebench preprocess", "milebench image build"),
    )
    job_args(p, model=True, many_tasks=True)
    threads_arg(p)
    p.add_argument("--runtime", choices=["local", "docker"], default="docker", help="Where the image runs.")
    p.add_argument("--gpus", default=None, help='"all" or comma-separated device ids (default: none).')
    p.add_argument("--api-network", default="bridge", help="Docker network of API models (others: none).")
    for benchmark in benchmarks().values():  # each installed benchmark adds its own commands, in its group
        if benchmark.commands is not None:
            module, function = benchmark.commands.split(":")
            own = parser.add_argument_group(benchmark.title or benchmark.name)
            getattr(importlib.import_module(module), function)(partial(add, group=own))
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
