"""`import-official --format`: lmms-eval's `--log_samples` files and VLMEvalKit's prediction files give the
same judgments as the official pred.json of the same answers; a malformed one is one named error, exit 2,
and nothing written. The files are written here as those tools write them (see
milebench.benchmarks.milebench.score.foreign)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from test_import_official import setup  # noqa: F401
from test_score_command import CHOICES, paths_of, specs_dir  # noqa: F401

from milebench import cli
from milebench.benchmarks.milebench import cli as milebench_cli
from milebench.benchmarks.milebench.score.foreign import FORMATS
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.io import read_jsonl

ANSWERS = {0: "B", 1: "The answer is C."}
"""The official pred.json of the `setup` fixture: ActionSequence samples 0 and 1 answered, 2 missing."""
GOLD = {0: "banana", 1: "cherry", 2: "apple"}


def lmms_record(sid: int, gold: str, answer: str, *, doc_id: int | None = None) -> dict:
    """A record of lmms-eval v0.2's samples file (evaluator.py's logged sample after save_results_samples:
    arguments keyed gen_args_i/arg_j, resps and filtered_resps stringified, the doc less its image keys)."""
    doc = {"sample_id": sid, "task_instruction_id": 0, "response": gold,
           "task_instance": {"context": "{image#1} What?", "choice_list": CHOICES}}  # fmt: skip
    return {
        "doc_id": sid if doc_id is None else doc_id,
        "doc": doc,
        "target": gold,
        "arguments": {"gen_args_0": {"arg_0": "Answer.\n{image#1} What?", "arg_1": {"max_new_tokens": 512}}},
        "resps": [[answer]],
        "filtered_resps": [answer],
        "doc_hash": "d" * 64,
        "prompt_hash": "p" * 64,
        "target_hash": "t" * 64,
        "milebench_accuracy": 1.0,
    }


def write_lmms(folder: Path, name: str, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def vlmeval_frame(rows: dict[int, tuple[str, str]]) -> pd.DataFrame:
    """A VLMEvalKit prediction table: the dataset's columns (less image) and the prediction."""
    return pd.DataFrame(
        {
            "index": list(rows),
            "question": ["{image#1} What?"] * len(rows),
            "A": [CHOICES[0]] * len(rows),
            "B": [CHOICES[1]] * len(rows),
            "answer": [gold for gold, _ in rows.values()],
            "category": ["T-1"] * len(rows),
            "prediction": [answer for _, answer in rows.values()],
        }
    )


def write_vlmeval(path: Path, frame: pd.DataFrame) -> Path:
    """As vlmeval/smp/file.py's dump writes it: quoted UTF-8 tsv or csv, or an index-free sheet."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".xlsx":
        frame.to_excel(path, index=False)
    else:
        sep = "\t" if path.suffix == ".tsv" else ","
        frame.to_csv(path, sep=sep, index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)
    return path


def run_import(specs: Path, outputs: Path, data: Path, fmt: str) -> int:
    argv = ["--specs", str(specs), "import-official", "--run", "t", "--model", "random", "--format", fmt]
    return cli.main([*argv, "--official-outputs", str(outputs), "--data-dir", str(data)])


def judgments_of(specs: Path, task: str = "ActionSequence") -> list[dict]:
    return list(read_jsonl(paths_of(specs).judgments("random", task, Mode.MULTI_IMAGE)))


def official_judgments(setup: tuple[Path, Path, Path]) -> list[dict]:  # noqa: F811
    specs, data, outputs = setup
    assert run_import(specs, outputs, data, "official") == 0
    judged = judgments_of(specs)
    paper = [(j["sample_id"], j["status"], j["extracted"]) for j in judged if j["scorer"] == "paper"]
    assert paper == [(0, "scored", "B"), (1, "scored", "AC"), (2, "missing", None)]
    paths_of(specs).judgments("random", "ActionSequence", Mode.MULTI_IMAGE).unlink()
    return judged


LMMS_NAMES = [
    "samples_milebench_actionsequence_0901_1234.jsonl",
    "20240917_123456_samples_ActionSequence.jsonl",
]
"""v0.2's samples_<task>_<date> and the later <date>_samples_<task>, with two spellings of the task."""


@pytest.mark.parametrize("name", LMMS_NAMES)
def test_lmms_eval_samples_give_the_official_judgments(setup: tuple[Path, Path, Path], name: str) -> None:  # noqa: F811
    specs, data, _ = setup
    expected = official_judgments(setup)
    folder = data.parent / "logs" / "llava__7b"
    # doc_id is lmms-eval's position, not the sample: the sample id comes from doc.sample_id.
    records = [lmms_record(sid, GOLD[sid], answer, doc_id=5 + sid) for sid, answer in ANSWERS.items()]
    write_lmms(folder, name, records)
    write_lmms(folder, "samples_mme_0901_1234.jsonl", [{"doc_id": 0}])  # another benchmark's: not read
    assert run_import(specs, folder, data, "lmms-eval") == 0
    assert judgments_of(specs) == expected
    preds = read_jsonl(paths_of(specs).predictions("random", "ActionSequence", Mode.MULTI_IMAGE))
    assert [(p["sample_id"], p["response"]) for p in preds] == list(ANSWERS.items())


@pytest.mark.parametrize("suffix", [".tsv", ".csv", ".xlsx"])
def test_vlmevalkit_predictions_give_the_official_judgments(
    setup: tuple[Path, Path, Path],  # noqa: F811
    suffix: str,
) -> None:
    specs, data, _ = setup
    expected = official_judgments(setup)
    work_dir = data.parent / "outputs" / "Qwen2-VL-7B" / "T20250101_Gabc"
    frame = vlmeval_frame({sid: (GOLD[sid], answer) for sid, answer in ANSWERS.items()})
    write_vlmeval(work_dir / f"Qwen2-VL-7B_MileBench_ActionSequence{suffix}", frame)
    write_vlmeval(work_dir / "Qwen2-VL-7B_MileBench_ActionSequence_acc.csv", pd.DataFrame({"acc": [1.0]}))
    assert run_import(specs, work_dir, data, "vlmevalkit") == 0
    assert judgments_of(specs) == expected


def test_every_format_the_command_offers_is_read() -> None:
    assert tuple(FORMATS) == milebench_cli.IMPORT_FORMATS


def lmms(name: str, record: dict) -> Callable[[Path], Path]:
    return lambda folder: write_lmms(folder, name, [record])


def vlmeval(name: str, frame: pd.DataFrame) -> Callable[[Path], Path]:
    return lambda folder: write_vlmeval(folder / name, frame)


SPOT = "samples_spot_the_diff_0901_1234.jsonl"
SPOT_TSV = "m_Spot-the-Diff.tsv"
GOOD = lmms_record(0, "the car is gone", "gone")
NO_DOC = {k: v for k, v in GOOD.items() if k != "doc"}
GOOD_ROW = {0: ("the car is gone", "gone")}

MALFORMED: dict[str, tuple[str, Callable[[Path], Path], str]] = {
    "lmms-eval 0.4 without doc": (
        "lmms-eval",
        lmms(SPOT, NO_DOC),
        "record 0: doc.sample_id: absent (no doc: lmms-eval 0.4 and later leave it out)",
    ),
    "lmms-eval doc without sample_id": (
        "lmms-eval",
        lmms(SPOT, {**GOOD, "doc": {"response": "the car is gone"}}),
        "record 0: doc.sample_id: Field required",
    ),
    "lmms-eval two repeats": (
        "lmms-eval",
        lmms(SPOT, {**GOOD, "resps": [["gone", "went"]]}),
        "record 0: resps: 2 responses; one answer per sample is scored",
    ),
    "lmms-eval another gold": (
        "lmms-eval",
        lmms(SPOT, {**GOOD, "target": "the dog"}),
        "record 0: target 'the dog' of sample 0 differs from the response in",
    ),
    "lmms-eval two files of one task": (
        "lmms-eval",
        lambda folder: (
            lmms(SPOT, GOOD)(folder),
            lmms("samples_Spot-the-Diff_0902_0000.jsonl", GOOD)(folder),
        )[0],
        "2 lmms-eval samples files of task Spot-the-Diff",
    ),
    "vlmevalkit without prediction": (
        "vlmevalkit",
        vlmeval(SPOT_TSV, vlmeval_frame(GOOD_ROW).drop(columns="prediction")),
        "line 1: no prediction column",
    ),
    "vlmevalkit index not a sample id": (
        "vlmevalkit",
        vlmeval(SPOT_TSV, vlmeval_frame(GOOD_ROW).assign(index=["q-0"])),
        "record 0 (line 2): index: 'q-0' is not a sample id (a whole number)",
    ),
    "vlmevalkit another gold": (
        "vlmevalkit",
        vlmeval("m_Spot-the-Diff.csv", vlmeval_frame(GOOD_ROW).assign(answer=["the dog"])),
        "record 0: answer 'the dog' of sample 0 differs from the response in",
    ),
    "vlmevalkit a damaged workbook": (
        "vlmevalkit",
        lambda folder: (folder / "m_Spot-the-Diff.xlsx").write_bytes(b"PK\x03\x04 not a zip") and folder,
        "m_Spot-the-Diff.xlsx: not an .xlsx workbook",
    ),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_file_is_one_named_error_exit_2_and_nothing_written(
    setup: tuple[Path, Path, Path],  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    case: str,
) -> None:
    """ActionSequence's file is sound, Spot-the-Diff's is not: nothing of either is written."""
    specs, data, _ = setup
    fmt, make, says = MALFORMED[case]
    folder = tmp_path / "foreign"
    folder.mkdir()
    if fmt == "lmms-eval":
        write_lmms(folder, LMMS_NAMES[0], [lmms_record(s, GOLD[s], a) for s, a in ANSWERS.items()])
    else:
        write_vlmeval(
            folder / "m_ActionSequence.tsv", vlmeval_frame({s: (GOLD[s], a) for s, a in ANSWERS.items()})
        )
    make(folder)
    before = sorted(tmp_path.rglob("*"))
    with caplog.at_level("ERROR"):
        assert run_import(specs, folder, data, fmt) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and str(folder) in errors[0] and says in errors[0], errors
    assert all(r.exc_info is None for r in caplog.records)
    assert sorted(tmp_path.rglob("*")) == before


def test_an_unknown_format_is_an_argument_error(
    setup: tuple[Path, Path, Path],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    specs, data, outputs = setup
    with pytest.raises(SystemExit) as exited:
        run_import(specs, outputs, data, "lm-eval")
    assert exited.value.code == 2
    assert "argument --format: invalid choice: 'lm-eval'" in capsys.readouterr().err
