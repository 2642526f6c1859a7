"""Helpers of the benchmarks' rules, included by the top Snakefile: the functions their params, inputs and
containers call (here, as Snakemake's lint wants functions apart from rules).

Untracked, image_uri and job_root serve every benchmark; the others read MileBench's rules file's globals (the
run, its models, the deployment) when a MileBench job is planned.
"""

import sys
from pathlib import Path

from milebench.containers.image import RECORDS_DIR, registry_uri
from milebench.benchmarks.milebench.spec.run import Mode
from snakemake.exceptions import WorkflowError


class Untracked:
    """A shell value that is not a result's input (where the interpreter or the specs folder lives):
    Snakemake's params trigger skips values it cannot represent, so moving a checkout re-runs nothing."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


def image_uri(family_name, registry=None):
    """The image a family's jobs run in under deployment apptainer (inert for the others): pulled from
    the configured image registry, else the one built beside the image records."""
    if registry is not None:
        return registry_uri(registry, family_name)
    return str((RECORDS_DIR / f"{family_name}.sif").resolve())


def job_root(layout):
    """A params function giving a job's `--root`: the folder its files are laid out under.

    `layout` is the job's first output as RunPaths names it (a pattern with wildcards); Snakemake gives the
    job that path, or the same path inside the copy a storage provider stages the job's files in. Every
    other input and output of the job must lie under the same root, or the job is refused by name.
    """

    def root(wildcards, input, output):
        given, expected = Path(output[0]), Path(str(layout).format(**dict(wildcards.items())))
        if given == expected:
            return "."
        n = len(expected.parts)
        if expected.is_absolute() or given.parts[-n:] != expected.parts:
            raise WorkflowError(
                f"{given}: not {expected} under a storage folder: the run's output_dir must be a relative "
                "path when a storage provider stages the job's files"
            )
        base = Path(*given.parts[:-n])
        outside = [str(f) for f in [*input, *output] if not Path(f).is_relative_to(base)]
        if outside:
            raise WorkflowError(f"{', '.join(outside)}: not under the job's storage folder {base}")
        return str(base)

    return root


def model_family(model):
    """The image family a model's jobs run in."""
    return MODELS[model].container or KIT_FAMILY


def stage_image(family_name):
    """The image record a stage job depends on when it runs in the family's image (none on the host)."""
    return [RECORDS_DIR / f"{family_name}.json"] if ALL_IN_IMAGES else []


def stage_mb(family_name):
    """The `milebench` of a stage job: in the family's image under docker_jobs=all."""
    return Untracked(f"{MB} --in-image {family_name}") if ALL_IN_IMAGES else MB


def regime_of(w):
    """The input regime whose prepared file a model reads (models of one regime share the file)."""
    return MODEL_REGIME[(w.model, Mode(w.mode))]


def infer_inputs(model, mode, tasks):
    """What an infer job of `model` reads for `tasks` in `mode`: their prepared samples, the images (and
    the kit's combined pictures) those name (built-in baselines read none), a tiny model's weights, the
    model's image record under docker, and the fetch manifest (provenance)."""
    regime = MODEL_REGIME[(model, mode)]
    return {
        "prepared": [P.prepared(task, mode, regime) for task in tasks],
        "images": [] if MODELS[model].builtin else [P.data_root, *(P.tiles(t, mode, regime) for t in tasks)],
        "model": [P.model_dir(model)] if model in TINY else [],
        "image": [RECORDS_DIR / f"{MODELS[model].container}.json"] if DOCKER else [],
        "data": P.fetch_manifest,
    }


def audit_inputs(job):
    """What a batch audit reads: the infer job's inputs of its model and tasks, and under docker the
    record of the image the audited variant runs in."""
    inputs = infer_inputs(job.plan.model, job.plan.mode, job.tasks)
    family_name = job.model.container or KIT_FAMILY
    return inputs | {"image": [RECORDS_DIR / f"{family_name}.json"] if DOCKER else []}


def check_api_prerequisites():
    """Stop the run (its message alone, on the console) when an API model with a missing prediction file
    cannot start: its key is not set and its endpoint is not marked keyless."""
    waiting = {c.model for c in CELLS if not P.predictions(c.model, c.task, c.mode).exists()}
    problems = missing_prerequisites(MODELS[name] for name in sorted(waiting))
    if problems:
        sys.exit("\n".join(["cannot start the run:", *problems]))


def infer_command(w):
    """`infer` on the host or in Snakemake's container; `container-infer` in the family's Docker image."""
    if not DOCKER:
        return "infer"
    gpus = " --gpus all" if RESOURCES[w.model].gpu else ""
    return f"container-infer --runtime docker{gpus}"
