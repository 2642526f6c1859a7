"""``milebench image build`` and ``milebench container-infer``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from milebench.containers.docker_runtime import (
    ContainerFailed,
    Terminated,
    caller_user,
    default_model_cache,
    job_spec,
    run_container,
)
from milebench.containers.image import ImageError, build_image, client_from_env, recorded_image, registry_uri
from milebench.infer.commands import model_spec
from milebench.paths import RunPaths
from milebench.preprocess.regime import model_regime
from milebench.provenance import COMMIT_VAR, DIRTY_VAR, IMAGE_ID_VAR, kit_version
from milebench.spec.base import SpecError
from milebench.spec.model import ModelSpec
from milebench.spec.registry import load_specs
from milebench.spec.run import LocalSource, Mode, RunSpec
from milebench.stage_inputs import preprocess_command, require

log = logging.getLogger(__name__)

SIGTERM_EXIT = 143


def image_build(args: argparse.Namespace) -> int:
    try:
        build_image(args.family, base=args.base, ca_bundle=args.ca_bundle)
    except ImageError as err:
        log.error("%s", err)
        return 1
    return 0


def image_uri(args: argparse.Namespace) -> int:
    """Print the registry reference a family's image must be pushed to for runtime apptainer."""
    try:
        sys.stdout.write(registry_uri(args.registry, args.family) + "\n")
    except ImageError as err:
        log.error("%s", err)
        return 1
    return 0


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
    """``infer`` for one cell, in this process (``--runtime local``) or in the family's image."""
    if args.runtime == "local":
        from milebench.infer.commands import infer

        return infer(args)
    specs = load_specs(args.specs)
    model = model_spec(specs, args.model)
    family_name = container_family(model, specs.root)
    run = specs.run(args.run)
    paths = RunPaths.for_run(run, base=args.root)
    regime = model_regime(specs, run, model.name, Mode(args.mode)).id
    prepared = paths.prepared(args.task, args.mode, regime)
    require(prepared, "prepared samples", preprocess_command(run.name, args.task, args.mode, regime))
    paths.out.mkdir(parents=True, exist_ok=True)
    cell: tuple[str, ...] = ("--run", run.name, "--root", str(args.root), "--model", model.name)
    cell += ("--task", args.task, "--mode", str(args.mode))
    threads = ("--threads", str(args.threads)) if args.threads else ()
    command = (*(("-v",) if args.verbose else ()), "infer", *cell, *threads)
    try:
        client = client_from_env()
        record = recorded_image(family_name, client=client)
        spec = job_spec(
            image=record.image_id,
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
            env=provenance_env(record.image_id),
        )
        run_container(client, spec)
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
