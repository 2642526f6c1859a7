"""MMLongEmbed's job record, written beside an output of the jobs that make a set, a run or the analysis:
the kit's commit, the hashes of the specs the job read, the environment, times and host. Archiving reads
it back for the kit commit, the image and the run's times."""

from __future__ import annotations

import socket
from datetime import datetime
from pathlib import Path
from typing import Annotated

from pydantic import PlainSerializer, ValidationError

from milebench.io import atomic_write_json
from milebench.provenance import Environment, KitVersion, environment, kit_version, provenance_path, utc_now
from milebench.spec.base import Spec, describe_errors

Time = Annotated[datetime, PlainSerializer(str, return_type=str)]
"""Written as ``str(datetime)`` (``2026-12-06 23:05:23.020092+00:00``), as it always was."""


class EmbedProvenance(Spec):
    stage: str
    run: str
    specs: dict[str, str]
    kit: KitVersion
    environment: Environment
    started_at: Time
    finished_at: Time
    host: str


def write_provenance(path: Path, stage: str, run: str, specs: dict[str, str], started: datetime) -> None:
    """Beside ``path``: the kit's commit, spec hashes, environment, times and host."""
    record = EmbedProvenance(
        stage=stage,
        run=run,
        specs=specs,
        kit=kit_version(),
        environment=environment(),
        started_at=started,
        finished_at=utc_now(),
        host=socket.gethostname(),
    )
    atomic_write_json(provenance_path(path), record.model_dump(mode="json"))


def read_provenance(path: Path) -> EmbedProvenance:
    """One job record; one that is not valid is a ValueError naming the file."""
    try:
        return EmbedProvenance.model_validate_json(path.read_bytes())
    except ValidationError as err:
        raise ValueError(f"{path}: not an MMLongEmbed job record: {describe_errors(err)}") from None
