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
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path

from milebench.arguments import HelpFormatter, KitParser, run_root_args, subcommands
from milebench.errors import KitError
from milebench.spec.base import SpecError
from milebench.spec.benchmark import Benchmark, benchmarks
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.names import UnknownName
from milebench.spec.run_limit import limit_runs

log = logging.getLogger("milebench")

SPECS_HELP = "Specs folder; one of your own overlays the kit's (default: the kit's own, specs/)."
EXAMPLES = (
    "milebench check-specs --specs my-specs        # your specs, over the kit's",
    "milebench COMMAND --help                      # a command's options, with their defaults",
)
"""The core's examples; each installed benchmark's own (its declaration's ``examples``) come between."""
WHOLE_RUN = """A whole run is one Snakemake command, which runs these stages for you:
  snakemake --cores all --config run=smoke
"""


def examples(installed: Iterable[Benchmark]) -> str:
    """The epilog of ``milebench --help``: the core's examples around every benchmark's, then a whole run."""
    lines = [EXAMPLES[0], *(line for b in installed for line in b.examples), *EXAMPLES[1:]]
    return "examples:\n" + "".join(f"  {line}\n" for line in lines) + "\n" + WHOLE_RUN


COMMAND_GROUPS = {
    "specs": "Every installed benchmark's specs: check them, export their schemas.",
    "containers": "The model families' images.",
    "bundles": "Artifact bundles of any benchmark's runs: pack one, re-check one offline.",
}
"""The headings of ``milebench --help``, in order; each installed benchmark's commands follow under its
own heading."""


def build_parser() -> argparse.ArgumentParser:
    parser = KitParser(
        prog="milebench",
        description="The MileBench reproducibility kit: one command per stage of a run.",
        epilog=examples(benchmarks().values()),
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
        group: argparse._ArgumentGroup,
        *,
        made_by: tuple[str, ...] | None = None,
        listed: bool = True,
    ) -> KitParser:
        """A command listed under ``group`` in ``milebench --help``; ``listed=False``: one only rules call,
        left out of the listing (argparse lists a command only when ``help`` is passed to ``add_parser``)."""
        p = sub.add_parser(name, description=help, formatter_class=HelpFormatter)
        p.made_by = made_by
        if listed:
            group._group_actions.append(argparse.Action([], dest=name, help=help))
            parser.listed.append(name)
        p.add_argument("--specs", type=Path, default=argparse.SUPPRESS, help=SPECS_HELP)
        p.set_defaults(target=target)
        return p

    specs, containers, bundles = groups.values()
    add(
        "check-specs",
        "milebench.commands.specs:check",
        "Validate every spec and their cross references.",
        specs,
        made_by=(),
    )
    p: argparse.ArgumentParser = add(
        "export-schemas",
        "milebench.commands.specs:export",
        "Write JSON Schemas of the spec models.",
        specs,
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
        "image",
        "milebench.containers.commands:image_build",
        "Container images of the model families.",
        containers,
    )
    image = subcommands(p, "image_command")
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
        "Pack a finished run of any benchmark into an artifact bundle.",
        bundles,
        made_by=("milebench report", "milebench embed-report"),
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
        bundles,
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
        metavar="CELL",
        help="A cell to re-run, as its benchmark names it (MileBench: MODEL/MODE/TASK; repeatable; "
        "default: --rerun-per-model drawn cells).",
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


def in_image(args: argparse.Namespace, command: Sequence[str]) -> int:
    """``--in-image``: the command line in a family's image, through what its benchmark declares for it."""
    runner = getattr(args, "in_image_runner", None)
    if runner is None:
        raise SystemExit(f"milebench --in-image: {args.command} does not run in an image")
    module_name, func_name = runner.split(":")
    return int(getattr(importlib.import_module(module_name), func_name)(args, command))


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
