"""Prediction files of other evaluation tools, read into official records for ``import-official``.

Both are read for MileBench-shaped tasks only, and only where a file names MileBench's own sample id and
carries its gold answer: the answers are then checked and judged exactly as the official ``pred.json``.

**lmms-eval** ``--log_samples`` (read in EvolvingLMMs-Lab/lmms-eval: ``lmms_eval/evaluator.py``, the
logged sample ``{doc_id, doc, target, arguments, resps, filtered_resps, ...}``, and
``lmms_eval/loggers/evaluation_tracker.py``, ``save_results_samples``): one JSONL file per task under
``<output_path>/<model>/``, named ``samples_<task>_<date>.jsonl`` (v0.2, 2024-09-01) or
``<date>_samples_<task>.jsonl`` (from 2024-09-17). ``doc`` is the dataset row without its image columns,
so a MileBench row keeps ``sample_id``; ``doc_id`` is only lmms-eval's position in its dataset. From v0.4
(2025-07) the file drops ``doc``, and such a file is refused: nothing in it names the sample.

**VLMEvalKit** (read in open-compass/VLMEvalKit: ``vlmeval/inference.py``, ``infer_data_job``, which
writes the dataset's columns less ``image`` plus ``prediction``, and ``vlmeval/smp/file.py``,
``get_pred_file_path`` and ``dump``): ``<work_dir>/<model>_<dataset>.xlsx`` (or ``.tsv``, ``.csv``, all
quoted UTF-8 by pandas), one row per sample with ``index``, ``question``, ``answer`` and ``prediction``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from milebench.benchmarks.milebench.score.official import (
    OFFICIAL,
    OfficialFormatError,
    OfficialRecord,
    PredictionFormat,
    json_lines,
    read_file,
    unwritable,
)
from milebench.io import read_regular, read_utf8
from milebench.spec.base import describe_errors


def slug(name: str) -> str:
    """A task name as tools spell it: lower case, runs of other characters as one ``_``."""
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


def names_task(name: str, task: str) -> bool:
    """Whether a tool's task or dataset name is the MileBench task: its name in any case, ``-`` or ``_``
    alike, with or without a ``milebench`` prefix (``milebench_spot_the_diff``, ``Spot-the-Diff``)."""
    return slug(name) in (slug(task), "milebench_" + slug(task))


def only_one(outputs: Path, task: str, found: list[Path], pattern: str) -> Path | None:
    if len(found) > 1:
        listed = ", ".join(p.name for p in sorted(found))
        raise OfficialFormatError(
            f"{outputs}: {len(found)} {pattern} files of task {task} ({listed}): keep one"
        )
    return found[0] if found else None


def files(outputs: Path) -> Iterator[Path]:
    return (p for p in sorted(outputs.iterdir()) if not p.name.startswith("."))


LMMS_DATE = r"\d{8}_\d{6}|\d{4}_\d{4}|\d{4}-\d{2}-\d{2}T[\d.-]+"
"""lmms-eval's ``get_datetime_str``: ``%m%d_%H%M`` (v0.2), ``%Y%m%d_%H%M%S`` later; lm-eval's ISO form."""
LMMS_NAMES = (
    re.compile(rf"samples_(?P<task>.+)_(?:{LMMS_DATE})\.jsonl"),
    re.compile(rf"(?:{LMMS_DATE})_samples_(?P<task>.+)\.jsonl"),
)


def find_lmms_eval(outputs: Path, task: str) -> Path | None:
    found = [
        path
        for path in files(outputs)
        if any((m := p.fullmatch(path.name)) and names_task(m["task"], task) for p in LMMS_NAMES)
    ]
    return only_one(outputs, task, found, "lmms-eval samples")


class LmmsEvalDoc(BaseModel):
    """The logged dataset row: only MileBench's sample id is read."""

    model_config = ConfigDict(extra="allow", frozen=True)

    sample_id: int


class LmmsEvalRecord(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    doc_id: int
    doc: LmmsEvalDoc
    target: str
    resps: Any


def one_text(value: Any, field: str) -> str:
    """The single response in lmms-eval's nesting (per request, then per repeat: ``[["text"]]``)."""
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, list):
        raise ValueError(f"{field}: {len(value)} responses; one answer per sample is scored")
    if not isinstance(value, str):
        raise ValueError(f"{field}: not text but {type(value).__name__}")
    return value


def read_lmms_eval(path: Path) -> list[OfficialRecord]:
    """``doc.sample_id`` is the sample id, ``target`` the gold answer and ``resps`` the raw answer, which
    the kit's scorers read as the official evaluator does (``filtered_resps``, what the task's filters
    made of it, is not read)."""
    rows = json_lines(path, read_file(path, read_utf8))
    records = []
    for index, row in enumerate(rows):
        where = f"{path}: record {index}"
        if (found := unwritable(row)) is not None:
            raise OfficialFormatError(f"{where}: {found[0]}: {found[1]}")
        if isinstance(row, dict) and "doc" not in row:
            raise OfficialFormatError(
                f"{where}: doc.sample_id: absent (no doc: lmms-eval 0.4 and later leave it out), so nothing "
                "names the MileBench sample; doc_id is only lmms-eval's position in its dataset"
            )
        try:
            record = LmmsEvalRecord.model_validate(row)
        except ValidationError as err:
            raise OfficialFormatError(f"{where}: {describe_errors(err)}") from None
        try:
            answer = one_text(record.resps, "resps")
        except ValueError as err:
            raise OfficialFormatError(f"{where}: {err}") from None
        records.append(
            OfficialRecord(sample_id=record.doc.sample_id, gt_response=record.target, pred_response=answer)
        )
    return records


VLMEVAL_SUFFIXES = (".xlsx", ".tsv", ".csv")
VLMEVAL_COLUMNS = ("index", "answer", "prediction")


def find_vlmevalkit(outputs: Path, task: str) -> Path | None:
    """``<model>_<dataset>.<suffix>`` whose dataset part names the task (VLMEvalKit's judge and score
    files, ``<model>_<dataset>_<judge>.xlsx``, ``..._acc.csv``, do not)."""
    found = []
    for path in files(outputs):
        if path.suffix in VLMEVAL_SUFFIXES:
            parts = path.stem.split("_")
            if any(names_task("_".join(parts[i:]), task) for i in range(1, len(parts))):
                found.append(path)
    return only_one(outputs, task, found, "VLMEvalKit prediction")


Rows = Iterator[tuple[str, list[str]]]
"""(where, cells) of each row of a table, the header first."""


def csv_rows(path: Path) -> Rows:
    text = read_file(path, read_utf8).removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if path.suffix == ".tsv" else ",")
    try:
        for row in reader:
            yield f"line {reader.line_num}", row
    except csv.Error as err:
        raise OfficialFormatError(f"{path}: line {reader.line_num}: not {path.suffix[1:]}: {err}") from None


def cell_text(value: object) -> str:
    """A spreadsheet cell as the text pandas wrote: empty for none, whole floats without ``.0``."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def xlsx_rows(path: Path) -> Rows:
    try:
        from openpyxl import load_workbook  # an optional extra: only .xlsx files need it
    except ImportError:
        raise OfficialFormatError(
            f"{path}: reading .xlsx needs openpyxl (pip install 'milebench[xlsx]'), or save it as .tsv"
        ) from None
    raw = read_file(path, read_regular)
    try:
        sheet = load_workbook(io.BytesIO(raw), read_only=True, data_only=True).worksheets[0]
        table = list(sheet.iter_rows(values_only=True))
    except Exception as err:  # a damaged or foreign file fails anywhere in openpyxl's zip and XML parsing
        raise OfficialFormatError(f"{path}: not an .xlsx workbook ({type(err).__name__}: {err})") from None
    for number, row in enumerate(table, start=1):
        yield f"row {number}", [cell_text(value) for value in row]


def whole_number(text: str, field: str) -> int:
    if not re.fullmatch(r"\d{1,18}", text.strip()):
        raise ValueError(f"{field}: {text[:40]!r} is not a sample id (a whole number)")
    return int(text)


def read_vlmevalkit(path: Path) -> list[OfficialRecord]:
    """``index`` is the sample id, ``answer`` the gold answer and ``prediction`` the answer; the other
    columns (``question``, the options, ``category``) are not read."""
    rows = xlsx_rows(path) if path.suffix == ".xlsx" else csv_rows(path)
    header_at, header = next(rows, ("line 1", []))
    missing = [c for c in VLMEVAL_COLUMNS if c not in header]
    if missing:
        raise OfficialFormatError(
            f"{path}: {header_at}: no {' or '.join(missing)} column (the header has {header[:8]})"
        )
    at = {column: header.index(column) for column in VLMEVAL_COLUMNS}
    records = []
    for index, (line, row) in enumerate(rows):
        where = f"{path}: record {index} ({line})"
        if not any(row):
            continue
        if len(row) != len(header):
            raise OfficialFormatError(f"{where}: {len(row)} fields, the header has {len(header)}")
        try:
            sample_id = whole_number(row[at["index"]], "index")
        except ValueError as err:
            raise OfficialFormatError(f"{where}: {err}") from None
        records.append(
            OfficialRecord(
                sample_id=sample_id, gt_response=row[at["answer"]], pred_response=row[at["prediction"]]
            )
        )
    return records


FORMATS: dict[str, PredictionFormat] = {
    fmt.name: fmt
    for fmt in (
        OFFICIAL,
        PredictionFormat(
            "lmms-eval",
            "samples_<task>_<date>.jsonl or <date>_samples_<task>.jsonl",
            find_lmms_eval,
            read_lmms_eval,
            id_field="doc.sample_id",
            gold_field="target",
        ),
        PredictionFormat(
            "vlmevalkit",
            "<model>_<task>.xlsx, .tsv or .csv",
            find_vlmevalkit,
            read_vlmevalkit,
            id_field="index",
            gold_field="answer",
        ),
    )
}
"""``import-official --format``: the official outputs, lmms-eval's samples, VLMEvalKit's predictions."""
