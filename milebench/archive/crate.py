"""RO-Crate metadata (a Workflow Run Crate), so a bundle can be deposited on an archival repository as is.

The crate describes the bundle in place: the Snakefile as the main workflow, one CreateAction for the
run with its inputs (specs, locks, data), outputs (predictions, scores, aggregate, verdict, report), times
and the images it ran in, and every file with its size and sha256. Every identifier and date comes from
the run, never from the moment of archiving, so the same run gives the same crate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from rocrate.model.contextentity import ContextEntity
from rocrate.rocrate import ROCrate

from milebench.archive.badges import Role
from milebench.archive.manifest import Entry, ImageEntry
from milebench.archive.source import WORKFLOW, is_workflow
from milebench.io import atomic_write_text

CRATE = "ro-crate-metadata.json"
PROFILES = (
    "https://w3id.org/ro/wfrun/process/0.5",
    "https://w3id.org/ro/wfrun/workflow/0.5",
)
"""With the Workflow RO-Crate profile, which ``rocrate`` adds itself for a main workflow."""
INPUTS = {Role.SPEC, Role.RUN_SPEC, Role.LOCK, Role.DATA_ARCHIVE, Role.WEIGHTS}
OUTPUTS = {
    Role.PREDICTION,
    Role.JUDGMENT,
    Role.TASK_SCORE,
    Role.AGGREGATE,
    Role.VERDICT,
    Role.REPORT,
    Role.FIGURE,
}
LICENSE = "Apache-2.0"
FORMATS = {
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".yaml": "application/yaml",
    ".html": "text/html",
    ".tex": "application/x-tex",
    ".png": "image/png",
    ".pdf": "application/pdf",
    ".tar": "application/x-tar",
    ".log": "text/plain",
}


def write_crate(
    bundle: Path,
    title: str,
    run: str,
    files: Sequence[Entry],
    images: Sequence[ImageEntry],
    started: datetime,
    finished: datetime,
) -> None:
    """Write ``ro-crate-metadata.json`` describing ``files`` (already in the bundle)."""
    crate = ROCrate(gen_preview=False)
    crate.name = f"{title} run {run}"
    crate.description = (
        f"Artifact bundle of the MileBench reproducibility kit's run {run}: its exact environments "
        "(images), specs, locks, source, predictions, judgments, scores, verdict and report; "
        "`milebench verify` re-checks it offline."
    )
    crate.license = LICENSE
    crate.datePublished = finished.isoformat()
    crate.root_dataset["conformsTo"] = [{"@id": p} for p in PROFILES]
    workflow = crate.add_workflow(dest_path=WORKFLOW, main=True, lang="snakemake")
    entities = {}
    for e in files:
        if e.path == WORKFLOW:
            continue
        props = {"contentSize": e.size, "sha256": e.sha256, "description": f"{e.role}: {e.produced_by}"}
        suffix = Path(e.path).suffix
        if suffix in FORMATS:
            props["encodingFormat"] = FORMATS[suffix]
        entities[e.path] = crate.add_file(dest_path=e.path, properties=props)
    containers = [
        crate.add(
            ContextEntity(
                crate,
                f"#image-{i.family}",
                properties={
                    "@type": "ContainerImage",
                    "additionalType": {"@id": "https://w3id.org/ro/terms/workflow-run#DockerImage"},
                    "name": f"milebench {i.family} image",
                    "sha256": i.image_id.removeprefix("sha256:"),
                    "subjectOf": {"@id": i.file},
                },
            )
        )
        for i in images
    ]
    action = crate.add_action(
        workflow,
        identifier=f"#run-{run}",
        object=[entities[e.path] for e in files if e.role in INPUTS],
        result=[entities[e.path] for e in files if e.role in OUTPUTS],
        properties={
            "name": f"milebench run {run}",
            "startTime": started.isoformat(),
            "endTime": finished.isoformat(),
        },
    )
    if containers:
        action["containerImage"] = containers if len(containers) > 1 else containers[0]
    included = [entities[e.path] for e in files if e.path != WORKFLOW and is_workflow(e.path)]
    if included:
        workflow["hasPart"] = included
    crate.root_dataset["mentions"] = [action]
    text = json.dumps(crate.metadata.generate(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write_text(bundle / CRATE, text)
