"""``milebench import-official``: bring predictions made by the official code into a run, and score them.

The official ``generate.py`` writes ``<outputs>/<model>/<Task>/pred.json``: a JSON list with one record
per sample holding at least ``sample_id``, ``gt_response`` and ``pred_response`` (plus ``image``,
``question``, ``gen_model_id``, ``gen_kwargs``); ``pred.jsonl`` holds the same records one a line. Each
record becomes a kit ``Prediction`` of the run, so old runs are scored by every scorer and shown in the
report beside new ones. Before anything is written, every record is checked against the MileBench data:
its sample must exist in the task file of the mode and its gold answer must equal the data's, so
predictions of another task or data version are refused, naming the file, record and sample. The file
itself is not trusted either: a folder or fifo of that name, bytes that are not UTF-8, nesting too deep
to parse, an integer too long to read and a string that cannot be written as UTF-8 (a lone surrogate) are
each one error naming the file, and the record and field where there is one; every task's file is read
and checked before any is written.

Scoring needs no more than the official evaluator does: the predictions and the task JSON. Where the
run has prepared samples for the model, answers are judged against them; otherwise against the task
JSON's gold alone (``GoldSample``), and the judgments, task score, provenance and report say that no
prompt was rebuilt. So an old run is scored without its images, which only prompts need.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from milebench.benchmarks.milebench.data.schema import TaskFile
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.commands import read_task_file, task_source
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.provenance import DataRevision, job_provenance, write_provenance
from milebench.benchmarks.milebench.records import (
    GoldSample,
    PreparedSample,
    preprocess_command,
    read_prepared,
)
from milebench.benchmarks.milebench.score.commands import score_task, write_scores
from milebench.benchmarks.milebench.score.sample_log import write_sample_log
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.errors import KitError
from milebench.infer.records import Prediction
from milebench.io import (
    UnreadableText,
    atomic_write_jsonl,
    canonical_json,
    read_utf8,
    sha256_file,
    sha256_text,
)
from milebench.provenance import utc_now
from milebench.spec.base import describe_errors
from milebench.stage_inputs import given, require

log = logging.getLogger(__name__)
T = TypeVar("T")

PRED_FILE = "pred.json"
PRED_FILES = (PRED_FILE, "pred.jsonl")
"""The official list, or the same records one a line (JSONL)."""


class OfficialFormatError(KitError, ValueError):
    """An official prediction file that is malformed or does not match the MileBench data."""

    exit_status = 2


MAX_NESTING = 32
"""Deepest lists or objects a record may hold: the official code's nest two levels (``gen_kwargs``,
``image``), and pydantic writes no more than 255."""
NESTED = f"lists or objects nested more than {MAX_NESTING} levels deep"


class LongInteger(str):
    """The digits of a JSON integer longer than Python reads (``sys.get_int_max_str_digits``)."""


def integer(digits: str) -> int | str:
    try:
        return int(digits)
    except ValueError:
        return LongInteger(digits)


def unwritable(row: Any) -> tuple[str, str] | None:
    """(field path, why) of the first value in a parsed record that cannot be kept: an integer too long
    to read, or a string with a lone surrogate (JSON's ``\\ud800`` escape: no UTF-8 file can hold it)."""
    todo: list[tuple[tuple[str, ...], Any]] = [((), row)]
    while todo:
        where, value = todo.pop()
        field = ".".join(where) or "<record>"
        if isinstance(value, dict | list) and len(where) >= MAX_NESTING:
            return where[0], NESTED
        if isinstance(value, LongInteger):
            return field, f"an integer of {len(value.lstrip('-'))} digits, more than can be read"
        if isinstance(value, str) and (problem := surrogate(value)) is not None:
            return field, problem
        if isinstance(value, dict):
            for key in value:
                if (problem := surrogate(key)) is not None:
                    return field, f"key {key!a}: {problem}"
            todo += reversed([((*where, key), item) for key, item in value.items()])
        elif isinstance(value, list):
            todo += reversed([((*where, str(i)), item) for i, item in enumerate(value)])
    return None


def too_deep(text: str) -> str:
    """The record (and its line) where JSON ``text`` (a list of records) first nests more than
    ``MAX_NESTING`` levels, for a text too deep to parse at all."""
    depth, record, line, in_string, escaped = 0, 0, 1, False, False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth - 2 >= MAX_NESTING:  # the list of records, then the record itself
                break
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 1:
            record += 1
        line += char == "\n"
    return f"record {record} (line {line})"


def surrogate(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"a lone surrogate ({text[err.start]!a}) at character {err.start}, not Unicode text"
    return None


class OfficialRecord(BaseModel):
    """The fields of an official prediction record that scoring needs; the others are kept aside."""

    model_config = ConfigDict(extra="allow", frozen=True)

    sample_id: int
    gt_response: str
    pred_response: str


def json_lines(path: Path, text: str) -> list[Any]:
    """The records of a JSONL text, one per non-blank line; an error names the line."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line, parse_int=integer))
        except json.JSONDecodeError as err:
            raise OfficialFormatError(f"{path}: line {number}: invalid JSON: {err}") from None
        except RecursionError:
            raise OfficialFormatError(f"{path}: line {number}: {NESTED}") from None
    return rows


def read_file(path: Path, read: Callable[[Path], T]) -> T:
    """``read(path)`` (its text or bytes), a file that cannot be read being one error naming it."""
    try:
        return read(path)
    except UnreadableText as err:
        raise OfficialFormatError(str(err)) from None
    except OSError as err:
        raise OfficialFormatError(f"{path}: cannot read: {err.strerror or err}") from None


def read_official(path: Path) -> list[OfficialRecord]:
    """Records of one ``pred.json`` (a JSON list) or ``pred.jsonl`` (one record a line); errors name the
    file, the record index (0-based, blank lines skipped) and the field."""
    text = read_file(path, read_utf8)
    if path.suffix == ".jsonl":
        rows = json_lines(path, text)
    else:
        try:
            rows = json.loads(text, parse_int=integer)
        except json.JSONDecodeError as err:
            raise OfficialFormatError(f"{path}: invalid JSON: {err}") from None
        except RecursionError:
            where = too_deep(text)
            raise OfficialFormatError(f"{path}: {where}: {NESTED}") from None
    if not isinstance(rows, list):
        raise OfficialFormatError(f"{path}: expected a JSON list of prediction records")
    records = []
    for index, row in enumerate(rows):
        if (found := unwritable(row)) is not None:
            raise OfficialFormatError(f"{path}: record {index}: {found[0]}: {found[1]}")
        try:
            records.append(OfficialRecord.model_validate(row))
        except ValidationError as err:
            raise OfficialFormatError(f"{path}: record {index}: {describe_errors(err)}") from None
    return records


@dataclass(frozen=True)
class PredictionFormat:
    """A tool's prediction files: where one task's file lies in an outputs folder, how it is read into
    official records, and what its sample id and gold answer are called there (for the errors)."""

    name: str
    looked_for: str
    find: Callable[[Path, str], Path | None]
    read: Callable[[Path], list[OfficialRecord]]
    id_field: str = "sample_id"
    gold_field: str = "gt_response"


def find_official(outputs: Path, task: str) -> Path | None:
    """``<outputs>/<Task>/pred.json`` or ``pred.jsonl``; both at once is an error."""
    found = [p for name in PRED_FILES if (p := outputs / task / name).exists()]
    if len(found) > 1:
        raise OfficialFormatError(f"{outputs / task}: both {' and '.join(PRED_FILES)}: keep one")
    return found[0] if found else None


def check_against_data(
    records: list[OfficialRecord], task_file: TaskFile, path: Path, source: Path, fmt: PredictionFormat
) -> None:
    """Every record names a sample of the task file and carries that sample's gold answer."""
    gold = {s.sample_id: s.response for s in task_file.data}
    for index, record in enumerate(records):
        if record.sample_id not in gold:
            raise OfficialFormatError(
                f"{path}: record {index}: {fmt.id_field} {record.sample_id} is not in {source}"
            )
        if record.gt_response != gold[record.sample_id]:
            raise OfficialFormatError(
                f"{path}: record {index}: {fmt.gold_field} {record.gt_response!r} of sample "
                f"{record.sample_id} differs from the response in {source} ({gold[record.sample_id]!r})"
            )


def to_predictions(
    records: list[OfficialRecord], task: str, mode: Mode, model: str, origin: str
) -> list[Prediction]:
    """Kit predictions; a repeated sample id keeps its last record, as the official code does."""
    by_id = {}
    for record in records:
        by_id[record.sample_id] = Prediction(
            task=task,
            mode=mode,
            model=model,
            sample_id=record.sample_id,
            response=record.pred_response,
            cache_key=f"{origin}:" + sha256_text(canonical_json(record.model_dump(mode="json"))),
            seconds=0.0,
        )
    return list(by_id.values())


def gold_samples(task: TaskSpec, task_file: TaskFile, mode: Mode, source: Path) -> list[GoldSample]:
    """The gold side of every sample of a task JSON, read as preprocess reads it (choices, image count)."""
    question_type = task_file.meta_data.question_type
    if question_type is not task.question_type:
        raise OfficialFormatError(
            f"{source}: meta_data.question_type {question_type} differs from the task spec "
            f"({task.question_type})"
        )
    return [
        GoldSample(
            task=task.name,
            mode=mode,
            sample_id=sample.sample_id,
            question_type=question_type,
            choices=tuple(choices) if (choices := sample.task_instance.choice_list) is not None else None,
            labelled_choices=task.labelled_choices,
            response=sample.response,
            image_quantity_level=sample.image_quantity_level,
            n_images=len(sample.task_instance.images_path),
        )
        for sample in task_file.data
    ]


@dataclass(frozen=True)
class ImportedTask:
    """One task's official predictions, checked against the task JSON they are judged by."""

    task: TaskSpec
    pred_file: Path
    predictions: list[Prediction]
    source: Path
    task_file: TaskFile


OFFICIAL = PredictionFormat("official", f"<Task>/{PRED_FILE}", find_official, read_official)


def import_task(
    task: TaskSpec,
    mode: Mode,
    model: str,
    outputs: Path,
    data_root: Path,
    fetch: str | None,
    fmt: PredictionFormat,
) -> ImportedTask | None:
    """One task's prediction file in ``fmt`` (None when the outputs have none) as the run's predictions,
    checked.

    ``fetch`` is the command that makes the task JSON, named when it is absent; None when ``data_root``
    is the user's ``--data-dir``, where an absent file is a wrong path first.
    """
    path = fmt.find(outputs, task.name)
    if path is None:
        return None
    records = fmt.read(path)
    source = task_source(task, mode, data_root)
    if fetch is None:
        given(source, "--data-dir", "task file (--data-dir is the MileBench/ folder of <Task>/<Task>.json)")
    source = require(source, "task file", fetch or "")
    task_file = read_task_file(source)
    check_against_data(records, task_file, path, source, fmt)
    predictions = to_predictions(records, task.name, mode, model, fmt.name)
    return ImportedTask(task, path, predictions, source, task_file)


def write_predictions(paths: RunPaths, model: str, mode: Mode, found: ImportedTask) -> None:
    out = paths.predictions(model, found.task.name, mode)
    atomic_write_jsonl(out, [p.model_dump(mode="json") for p in found.predictions])
    log.info("%s: %d predictions -> %s", found.pred_file, len(found.predictions), out)


def scoring_samples(
    mode: Mode, found: ImportedTask, prepared: Path, made_by: str
) -> list[PreparedSample] | list[GoldSample]:
    """The run's prepared samples where preprocess made them, else the task JSON's gold alone."""
    if prepared.exists():
        return read_prepared(prepared, made_by)
    log.info("%s: no prepared samples; judging against %s alone (no prompt rebuilt)", prepared, found.source)
    return gold_samples(found.task, found.task_file, mode, found.source)


def task_json_revision(source: Path, data_root: Path) -> DataRevision:
    """Provenance of judgments made against a task JSON outside the run's fetched data."""
    return DataRevision(
        kind="task-json", revision=None, archives={str(source.relative_to(data_root)): sha256_file(source)}
    )


def score_imported(
    specs: Specs,
    run: RunSpec,
    paths: RunPaths,
    model: str,
    found: ImportedTask,
    mode: Mode,
    data_dir: Path | None,
) -> None:
    """Judge one imported task with every scorer; write its judgments, task score and provenance."""
    started, task = utc_now(), found.task
    regime = model_regime(specs, run, model, mode).id
    made_by = preprocess_command(run.name, task.name, mode, regime)
    samples = scoring_samples(mode, found, paths.prepared(task.name, mode, regime), made_by)
    predictions = {p.sample_id: p for p in found.predictions}
    judgments, task_score = score_task(task, model, mode, samples, predictions)
    write_scores(paths, judgments, task_score)
    write_sample_log(paths.samples(model, task.name, mode), samples, predictions, judgments)
    record = job_provenance(
        stage="score",
        specs=specs,
        run=run,
        model=specs.models[model],
        task=task.name,
        mode=mode.value,
        outputs=tuple(
            paths.relative(p)
            for p in (
                paths.judgments(model, task.name, mode),
                paths.task_score(model, task.name, mode),
                paths.samples(model, task.name, mode),
            )
        ),
        fetch_manifest=paths.fetch_manifest,
        started_at=started,
        data=None if data_dir is None else task_json_revision(found.source, data_dir),
        prompt_rebuilt=task_score.prompt_rebuilt,
        predictions_from=found.pred_file,
    )
    write_provenance(paths.score_provenance(model, task.name, mode), record)
