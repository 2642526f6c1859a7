"""``milebench import-official``: bring predictions made by the official code into a run, and score them.

The official ``generate.py`` writes ``<outputs>/<model>/<Task>/pred.json``: a JSON list with one record
per sample holding at least ``sample_id``, ``gt_response`` and ``pred_response`` (plus ``image``,
``question``, ``gen_model_id``, ``gen_kwargs``). Each record becomes a kit ``Prediction`` of the run, so
old runs are scored by every scorer and shown in the report beside new ones. Before anything is
written, every record is checked against the MileBench data: its sample must exist in the task file
of the mode and its gold answer must equal the data's, so predictions of another task or data
version are refused, naming the file, record and sample.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from milebench.data.schema import TaskFile
from milebench.io import atomic_write_jsonl, canonical_json, sha256_text
from milebench.paths import RunPaths
from milebench.plan import applies
from milebench.preprocess.commands import read_task_file, task_source
from milebench.record_files import read_prepared
from milebench.records import Prediction
from milebench.score.commands import score_task, write_scores
from milebench.spec.base import SpecError, describe_errors
from milebench.spec.registry import load_specs
from milebench.spec.run import Mode
from milebench.spec.task import TaskSpec

log = logging.getLogger(__name__)

PRED_FILE = "pred.json"


class OfficialFormatError(ValueError):
    """An official prediction file that is malformed or does not match the MileBench data."""


class OfficialRecord(BaseModel):
    """The fields of an official prediction record that scoring needs; the others are kept aside."""

    model_config = ConfigDict(extra="allow", frozen=True)

    sample_id: int
    gt_response: str
    pred_response: str


def read_official(path: Path) -> list[OfficialRecord]:
    """Records of one ``pred.json``; errors name the file, the record index and the field."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise OfficialFormatError(f"{path}: invalid JSON: {err}") from None
    if not isinstance(rows, list):
        raise OfficialFormatError(f"{path}: expected a JSON list of prediction records")
    records = []
    for index, row in enumerate(rows):
        try:
            records.append(OfficialRecord.model_validate(row))
        except ValidationError as err:
            raise OfficialFormatError(f"{path}: record {index}: {describe_errors(err)}") from None
    return records


def check_against_data(records: list[OfficialRecord], task_file: TaskFile, path: Path, source: Path) -> None:
    """Every record names a sample of the task file and carries that sample's gold answer."""
    gold = {s.sample_id: s.response for s in task_file.data}
    for index, record in enumerate(records):
        if record.sample_id not in gold:
            raise OfficialFormatError(
                f"{path}: record {index}: sample_id {record.sample_id} is not in {source}"
            )
        if record.gt_response != gold[record.sample_id]:
            raise OfficialFormatError(
                f"{path}: record {index}: gt_response {record.gt_response!r} of sample {record.sample_id} "
                f"differs from the response in {source} ({gold[record.sample_id]!r})"
            )


def to_predictions(records: list[OfficialRecord], task: str, mode: Mode, model: str) -> list[Prediction]:
    """Kit predictions; a repeated sample id keeps its last record, as the official code does."""
    by_id = {}
    for record in records:
        by_id[record.sample_id] = Prediction(
            task=task,
            mode=mode,
            model=model,
            sample_id=record.sample_id,
            response=record.pred_response,
            cache_key="official:" + sha256_text(canonical_json(record.model_dump(mode="json"))),
            seconds=0.0,
        )
    return list(by_id.values())


def import_task(
    task: TaskSpec, mode: Mode, model: str, outputs: Path, data_root: Path, paths: RunPaths
) -> list[Prediction] | None:
    """Convert one task's ``pred.json`` (None when the outputs have none) into the run's predictions."""
    path = outputs / task.name / PRED_FILE
    if not path.exists():
        return None
    records = read_official(path)
    source = task_source(task, mode, data_root)
    check_against_data(records, read_task_file(source), path, source)
    predictions = to_predictions(records, task.name, mode, model)
    atomic_write_jsonl(
        paths.predictions(model, task.name, mode), [p.model_dump(mode="json") for p in predictions]
    )
    log.info("%s: %d records -> %s", path, len(records), paths.predictions(model, task.name, mode))
    return predictions


def import_official(args: argparse.Namespace) -> int:
    specs = load_specs(args.specs)
    run = specs.run(args.run)
    mode = Mode(args.mode)
    if args.model not in run.models:
        raise SpecError(specs.root / "runs" / f"{run.name}.yaml",
                        [("models", f"model {args.model!r} is not part of run {run.name!r}")])  # fmt: skip
    paths = RunPaths.for_run(run)
    data_root = args.data_dir or paths.data_root
    imported = 0
    for task in specs.run_tasks(run):
        if not applies(task, mode):
            continue
        predictions = import_task(task, mode, args.model, args.outputs, data_root, paths)
        if predictions is None:
            log.warning("%s: no %s; the task's samples stay missing", args.outputs / task.name, PRED_FILE)
            continue
        imported += 1
        prepared = paths.prepared(task.name, mode)
        if not prepared.exists():
            log.warning("%s: not prepared yet; score later with `milebench score` after preprocess", prepared)
            continue
        judgments, task_score = score_task(
            task, args.model, mode, read_prepared(prepared), {p.sample_id: p for p in predictions}
        )
        write_scores(paths, judgments, task_score)
    if imported == 0:
        log.error("%s: no <Task>/%s of any task of run %s", args.outputs, PRED_FILE, run.name)
        return 1
    return 0
