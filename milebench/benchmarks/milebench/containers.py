"""MileBench's stages in a family's image: ``milebench container-infer`` and ``milebench --in-image``."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.records import preprocess_command
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.run import HubSource, LocalSource, MirrorSource, Mode, RunSpec
from milebench.containers.docker_runtime import (
    ContainerFailed,
    ContainerSpec,
    Terminated,
    caller_user,
    container_spec,
    default_model_cache,
    job_spec,
    run_container,
)
from milebench.containers.image import (
    RECORDS_DIR,
    ImageError,
    client_from_env,
    recorded_image,
)
from milebench.data.download import ENVIRONMENT as DOWNLOAD_ENVIRONMENT
from milebench.data.download import local_source
from milebench.provenance import COMMIT_VAR, DIRTY_VAR, IMAGE_ID_VAR, kit_version
from milebench.spec.base import SpecError
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import for_run
from milebench.stage_inputs import require

log = logging.getLogger(__name__)

SIGTERM_EXIT = 143


def container_family(model: ModelSpec, specs_root: os.PathLike[str] | str) -> str:
    """The model's image family, or a spec error naming the model's file when it has none."""
    if model.container is None:
        raise SpecError(
            f"{os.fspath(specs_root)}/models/{model.name}.yaml",
            [("container", "null: this model has no container image, run it with `milebench infer`")],
        )
    return model.container


def local_data(run: RunSpec) -> tuple[Path, ...]:
    """An already extracted tree outside the results folder (``data: {kind: local}``) must be visible too,
    at its resolved path, which the fetch stage links to; a relative path is taken from the working folder."""
    if isinstance(run.data, LocalSource) and Path(run.data.path).is_dir():
        return (Path(run.data.path).resolve(),)
    return ()


def provenance_env(image_id: str) -> dict[str, str]:
    """What the job's provenance cannot see from inside the image: the image itself and the host's
    checkout (the image was built from it: a stale image is refused before the job starts)."""
    kit = kit_version()
    env = {IMAGE_ID_VAR: image_id, COMMIT_VAR: kit.commit}
    if kit.dirty is not None:
        env[DIRTY_VAR] = "1" if kit.dirty else "0"
    return env


def container_infer(args: argparse.Namespace) -> int:
    """``infer`` for its cells, in this process (``--runtime local``) or in the family's image."""
    if args.runtime == "local":
        from milebench.benchmarks.milebench.infer.commands import infer

        return infer(args)
    specs = load_specs(args.specs)
    run = specs.run(args.run)
    model = for_run(specs.model(args.model), run)  # a variant may run in another family's image
    family_name = container_family(model, specs.root)
    paths = RunPaths.for_run(run, base=args.root)
    regime = model_regime(specs, run, model.name, Mode(args.mode)).id
    for task in args.task:
        prepared = paths.prepared(task, args.mode, regime)
        require(prepared, "prepared samples", preprocess_command(run.name, task, args.mode, regime))
    paths.out.mkdir(parents=True, exist_ok=True)
    cell: tuple[str, ...] = ("--run", run.name, "--root", str(args.root), "--model", model.name)
    cell += (*(arg for task in args.task for arg in ("--task", task)), "--mode", str(args.mode))
    threads = ("--threads", str(args.threads)) if args.threads else ()
    command = (*(("-v",) if args.verbose else ()), "infer", *cell, *threads)

    def container(image_id: str) -> ContainerSpec:
        return job_spec(
            image=image_id,
            model=model,
            command=command,
            specs_root=specs.root,
            writable=(paths.out,),
            readable=local_data(run),
            model_cache=default_model_cache(os.environ),
            workdir=Path.cwd(),
            gpus=args.gpus,
            api_network=args.api_network,
            user=caller_user(),
            labels={"org.milebench.run": run.name, "org.milebench.model": model.name},
            env=provenance_env(image_id),
        )

    return run_in_image(family_name, args.root, container)


def run_in_image(family_name: str, root: Path, container: Callable[[str], ContainerSpec]) -> int:
    """Run ``container(image id)`` in the family's recorded image (its record under ``root``); the
    command's exit code, 1 for an image that is missing or stale, 143 when terminated."""
    try:
        client = client_from_env()
        record = recorded_image(family_name, records=root / RECORDS_DIR, client=client)
        run_container(client, container(record.image_id))
    except ImageError as err:
        log.error("%s", err)
        return 1
    except ContainerFailed as err:
        log.error("%s", err)
        return err.exit_code
    except Terminated:
        log.error("terminated: the container was stopped and removed")
        return SIGTERM_EXIT
    return 0


IN_IMAGE_COMMANDS = ("fixture", "fetch", "tiny-model", "preprocess", "score", "aggregate", "report", "audit")
"""The stages ``--in-image`` runs in an image; infer has ``container-infer`` (GPUs, API networks)."""


def fetch_access(run: RunSpec) -> tuple[tuple[Path, ...], bool]:
    """What a fetch reads beyond the run's folders: a mirror on the local disk (read-only, at its resolved
    path), or the network (the hub, an http(s) mirror)."""
    if isinstance(run.data, HubSource):
        return (), True
    if isinstance(run.data, MirrorSource):
        folder = local_source(run.data.url)
        return ((), True) if folder is None else ((folder.resolve(),), False)
    return local_data(run), False


def stage_container(
    args: argparse.Namespace, specs: Specs, command: Sequence[str], image_id: str
) -> ContainerSpec:
    """The container of one stage command: the run's output folder under its ``--root`` (and its reports
    folder for the report and the audit, a fixture's ``--out`` for the fixture) read-write, a local data
    tree or mirror (and a drift audit's other run) read-only; a network only to fetch from the hub or an
    http(s) mirror; the GPUs a batch audit names."""
    writable: list[Path] = [args.out] if args.command == "fixture" else []
    readable: tuple[Path, ...] = ()
    passthrough: tuple[str, ...] = ()
    network, labels = "none", {"org.milebench.command": args.command}
    if args.command != "fixture":
        run = specs.run(args.run)
        paths = RunPaths.for_run(run, base=args.root)
        writable += [paths.out, paths.reports] if args.command in ("report", "audit") else [paths.out]
        readable, online = fetch_access(run) if args.command == "fetch" else (local_data(run), False)
        if args.command == "audit" and getattr(args, "run_b", None) is not None:
            other = RunPaths.for_run(specs.run(args.run_b), base=args.root_b or args.root)
            readable += (other.out,)
        labels["org.milebench.run"] = run.name
        if online:
            network, passthrough = "bridge", DOWNLOAD_ENVIRONMENT
    for folder in writable:
        folder.mkdir(parents=True, exist_ok=True)  # a bind mount needs its source
    return container_spec(
        image=image_id,
        command=tuple(command),
        specs_root=specs.root,
        writable=tuple(writable),
        readable=readable,
        model_cache=default_model_cache(os.environ),
        workdir=Path.cwd(),
        network=network,
        passthrough=passthrough,
        gpus=getattr(args, "gpus", None),
        user=caller_user(),
        labels=labels,
        env=provenance_env(image_id),
    )


def in_image(args: argparse.Namespace, command: Sequence[str]) -> int:
    """``milebench --in-image FAMILY <stage> ...``: the stage command line ``command`` in the family's
    recorded image instead of this process (``--config docker_jobs=all``)."""
    if args.command not in IN_IMAGE_COMMANDS:
        hint = "; run infer with `milebench container-infer`" if args.command == "infer" else ""
        raise SystemExit(
            f"milebench --in-image: runs {', '.join(IN_IMAGE_COMMANDS)}, not {args.command}{hint}"
        )
    specs = load_specs(args.specs)
    root = Path(".") if args.command == "fixture" else args.root
    return run_in_image(args.in_image, root, lambda image_id: stage_container(args, specs, command, image_id))
