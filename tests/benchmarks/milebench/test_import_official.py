"""`milebench import-official`: official `<model>/<Task>/pred.json` files become scored predictions."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from test_score_command import CHOICES, paths_of, sample, specs_dir  # noqa: F401

from milebench import cli
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.provenance import read_provenance
from milebench.benchmarks.milebench.score.aggregate import TaskScore
from milebench.benchmarks.milebench.score.official import OfficialFormatError, read_official
from milebench.benchmarks.milebench.scoring import import_official
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.io import atomic_write_jsonl, read_jsonl
from milebench.spec.base import SpecError
from milebench.spec.folder import DEFAULT_SPECS
from milebench.stage_inputs import NoSuchPath


def data_file(root: Path, task: str, samples: list[tuple[int, str, list[str] | None]]) -> None:
    """An upstream task JSON (``MileBench/<Task>/<Task>.json``)."""
    qtype = "multi-choice" if samples[0][2] else "open-ended"
    data = [
        {
            "sample_id": sid,
            "task_instruction_id": 0,
            "task_instance": {
                "context": "{image#1} What?",
                "images_path": ["0.jpg"],
                **({"choice_list": choices} if choices else {}),
            },
            "response": gold,
            "image_quantity_level": "Few",
        }
        for sid, gold, choices in samples
    ]
    path = root / task / f"{task}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"meta_data": {"task_instruction": ["Answer."], "question_type": qtype}, "data": data})
    )


def official_record(sid: int, gold: str, pred: str) -> dict:
    """A record as the official generate.py writes it (collate_batch_for_output)."""
    return {
        "sample_id": sid,
        "image": ["data/MileBench/ActionSequence/images/0.jpg"],
        "question": "{image#1} What?",
        "gt_response": gold,
        "gen_model_id": "llava-v1.5-7b",
        "pred_response": pred,
        "gen_kwargs": {"max_new_tokens": 512, "do_sample": False},
    }


@pytest.fixture
def setup(specs_dir: Path, tmp_path: Path) -> tuple[Path, Path, Path]:  # noqa: F811
    data = tmp_path / "MileBench"
    golds = ["banana", "cherry", "apple"]
    data_file(data, "ActionSequence", [(i, g, CHOICES) for i, g in enumerate(golds)])
    data_file(data, "Spot-the-Diff", [(0, "the car is gone", None)])
    paths = paths_of(specs_dir)
    atomic_write_jsonl(
        paths.prepared("ActionSequence", Mode.MULTI_IMAGE),
        [sample("ActionSequence", i, g, CHOICES, 1, "Few") for i, g in enumerate(golds)],
    )
    outputs = tmp_path / "outputs" / "llava-v1.5-7b"
    pred = outputs / "ActionSequence" / "pred.json"
    pred.parent.mkdir(parents=True)
    records = [official_record(0, "banana", "B"), official_record(1, "cherry", "The answer is C.")]
    pred.write_text(json.dumps(records, indent=4, ensure_ascii=False))
    return specs_dir, data, outputs


def ns(specs_dir: Path, outputs: Path, data: Path) -> argparse.Namespace:  # noqa: F811
    return argparse.Namespace(
        run="t",
        model="random",
        mode=Mode.MULTI_IMAGE,
        outputs=outputs,
        data_dir=data,
        specs=specs_dir,
        root=Path("."),
        report=False,
    )


def test_imports_and_scores_with_both_scorers(setup: tuple[Path, Path, Path]) -> None:
    specs_dir, data, outputs = setup  # noqa: F811
    assert import_official(ns(specs_dir, outputs, data)) == 0
    paths = paths_of(specs_dir)
    preds = list(read_jsonl(paths.predictions("random", "ActionSequence", Mode.MULTI_IMAGE)))
    assert [(p["sample_id"], p["response"]) for p in preds] == [(0, "B"), (1, "The answer is C.")]
    assert all(p["cache_key"].startswith("official:") and p["model"] == "random" for p in preds)
    judgments = list(read_jsonl(paths.judgments("random", "ActionSequence", Mode.MULTI_IMAGE)))
    paper = [(j["sample_id"], j["status"], j["extracted"]) for j in judgments if j["scorer"] == "paper"]
    assert paper == [(0, "scored", "B"), (1, "scored", "AC"), (2, "missing", None)]
    standard = [j["extracted"] for j in judgments if j["scorer"] == "standard"]
    assert standard == ["B", "C", None]
    assert all(j["prompt_rebuilt"] for j in judgments)  # the run's prepared samples were there
    result = json.loads(paths.task_score("random", "ActionSequence", Mode.MULTI_IMAGE).read_text())
    # Sample 2 has no official answer: it counts as wrong (1 right of 3); scored-only: 1 of the 2 answers.
    assert result["score"] == pytest.approx(100 / 3) and result["missing_ids"] == [2]
    assert result["scored_only"] == pytest.approx(50.0)
    assert result["variants"]["standard"]["score"] == pytest.approx(200 / 3)


def test_gold_answer_of_another_data_version_is_refused(setup: tuple[Path, Path, Path]) -> None:
    specs_dir, data, outputs = setup  # noqa: F811
    pred = outputs / "ActionSequence" / "pred.json"
    pred.write_text(json.dumps([official_record(0, "date", "B")]))
    with pytest.raises(
        OfficialFormatError, match=r"pred\.json: record 0: gt_response 'date' of sample 0 differs"
    ):
        import_official(ns(specs_dir, outputs, data))


def test_unknown_sample_and_malformed_records_name_file_and_record(tmp_path: Path, setup) -> None:
    specs_dir, data, outputs = setup  # noqa: F811
    pred = outputs / "ActionSequence" / "pred.json"
    pred.write_text(json.dumps([official_record(9, "banana", "B")]))
    with pytest.raises(OfficialFormatError, match="record 0: sample_id 9 is not in"):
        import_official(ns(specs_dir, outputs, data))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"sample_id": 1, "gt_response": "x"}]))
    with pytest.raises(OfficialFormatError, match=r"bad\.json: record 0: pred_response: Field required"):
        read_official(bad)
    bad.write_text(json.dumps({"sample_id": 1}))
    with pytest.raises(OfficialFormatError, match="expected a JSON list"):
        read_official(bad)


def test_nothing_to_import_and_unknown_model_fail(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    specs_dir, data, _ = setup  # noqa: F811
    (tmp_path / "empty").mkdir()
    assert import_official(ns(specs_dir, tmp_path / "empty", data)) == 1
    with pytest.raises(NoSuchPath, match=r"--official-outputs: .*absent: no such official outputs folder"):
        import_official(ns(specs_dir, tmp_path / "absent", data))
    other = ns(specs_dir, tmp_path, data)
    other.model = "nobody"
    with pytest.raises(SpecError, match="'nobody' is not part of run 't'"):
        import_official(other)


def test_a_mistyped_data_dir_is_a_wrong_path_not_a_missing_download(
    setup: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A --data-dir that is not there (or holds no task JSON) says so; it never suggests a fetch."""
    specs_dir, data, outputs = setup  # noqa: F811
    with pytest.raises(NoSuchPath, match=r"argument --data-dir: .*nowhere: no such MileBench data folder"):
        import_official(ns(specs_dir, outputs, data.parent / "nowhere"))
    argv = ["--specs", str(specs_dir), "import-official", "--run", "t", "--model", "random"]
    assert cli.main([*argv, "--official-outputs", str(outputs), "--data-dir", str(data.parent / "no")]) == 2
    assert "no such MileBench data folder" in caplog.text and "fetch" not in caplog.text
    (data / "ActionSequence" / "ActionSequence.json").unlink()
    with pytest.raises(NoSuchPath, match=r"ActionSequence\.json: no such task file \(--data-dir is the Mile"):
        import_official(ns(specs_dir, outputs, data))


def test_score_command_takes_an_official_outputs_folder(setup: tuple[Path, Path, Path]) -> None:
    """`milebench score --official-outputs DIR` scores every task found there, like import-official."""
    specs_dir, data, outputs = setup  # noqa: F811
    argv = ["--specs", str(specs_dir), "score", "--run", "t", "--model", "random", "--mode", "multi-image"]
    assert cli.main([*argv, "--official-outputs", str(outputs), "--data-dir", str(data)]) == 0
    judgments = paths_of(specs_dir).judgments("random", "ActionSequence", Mode.MULTI_IMAGE)
    paper = [j["extracted"] for j in read_jsonl(judgments) if j["scorer"] == "paper"]
    assert paper == ["B", "AC", None]
    with pytest.raises(SystemExit, match="--task is required"):
        cli.main(argv)


def test_official_outputs_and_task_json_alone_give_judgments_scores_and_a_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No images: `import-official --report` scores against the task JSON and says no prompt was rebuilt."""
    mirror, tree = tmp_path / "mirror", tmp_path / "data" / "MileBench"
    assert cli.main(["fixture", "--out", str(mirror)]) == 0
    for archive in sorted(mirror.glob("*.tar.gz")):  # the data without its images: task JSON files only
        with tarfile.open(archive) as tar:
            task_json = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".json")]
            tar.extractall(tmp_path / "data", members=task_json, filter="data")
    assert sorted({p.suffix for p in tree.rglob("*") if p.is_file()}) == [".json"]
    assert not list(tree.glob("*/images"))

    kit_specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, kit_specs)
    run = {"name": "old", "description": "An old official run.", "models": ["llava-1.5-7b"],
           "data": {"kind": "local", "path": str(tree)}, "output_dir": "results"}  # fmt: skip
    (kit_specs / "runs" / "old.yaml").write_text(yaml.safe_dump(run), encoding="utf-8")
    outputs = tmp_path / "outputs" / "llava-v1.5-7b"
    for task in load_specs(kit_specs).tasks:
        samples = json.loads((tree / task / f"{task}.json").read_text(encoding="utf-8"))["data"]
        # Right everywhere except sample 0, which answers nothing useful.
        records = [
            official_record(
                s["sample_id"], s["response"], "no idea" if s["sample_id"] == 0 else s["response"]
            )
            for s in samples
        ]
        (outputs / task).mkdir(parents=True)
        (outputs / task / "pred.json").write_text(json.dumps(records, indent=4), encoding="utf-8")

    elsewhere = tmp_path / "elsewhere"  # the run's files are laid out under --root, not the working folder
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    argv = ["--specs", str(kit_specs), "import-official", "--run", "old", "--model", "llava-1.5-7b"]
    options = ["--official-outputs", str(outputs), "--data-dir", str(tree), "--root", str(tmp_path)]
    assert cli.main([*argv, *options, "--report"]) == 0
    assert list(elsewhere.iterdir()) == []

    paths = RunPaths.for_run(load_specs(kit_specs).run("old"), base=tmp_path)
    judgments = list(read_jsonl(paths.judgments("llava-1.5-7b", "ActionSequence", Mode.MULTI_IMAGE)))
    assert [(j["scorer"], j["sample_id"], j["score"]) for j in judgments] == [
        ("paper", 0, 0.0), ("paper", 1, 1.0), ("paper", 2, 1.0),
        ("standard", 0, 0.0), ("standard", 1, 1.0), ("standard", 2, 1.0),
    ]  # fmt: skip
    assert all(j["prompt_rebuilt"] is False for j in judgments)
    score = TaskScore.model_validate_json(
        paths.task_score("llava-1.5-7b", "ActionSequence", Mode.MULTI_IMAGE).read_text()
    )
    assert score.prompt_rebuilt is False and score.n_scored == 3
    assert score.score == pytest.approx(200 / 3) and score.variants["standard"].score == pytest.approx(
        200 / 3
    )
    record = read_provenance(paths.score_provenance("llava-1.5-7b", "ActionSequence", Mode.MULTI_IMAGE))
    assert record.prompt_rebuilt is False
    assert record.outputs == tuple(
        str(paths.relative(p))
        for p in (
            paths.judgments("llava-1.5-7b", "ActionSequence", Mode.MULTI_IMAGE),
            paths.task_score("llava-1.5-7b", "ActionSequence", Mode.MULTI_IMAGE),
            paths.samples("llava-1.5-7b", "ActionSequence", Mode.MULTI_IMAGE),
        )
    )
    # The per-sample log of an import: no prompt and no image, the answers and judgments as scored.
    logged = list(read_jsonl(paths.samples("llava-1.5-7b", "ActionSequence", Mode.MULTI_IMAGE)))
    assert [(r["sample_id"], r["prompt"], r["images"], r["score"]) for r in logged] == [
        (0, None, None, 0.0), (1, None, None, 1.0), (2, None, None, 1.0),
    ]  # fmt: skip
    assert [r["answer"] for r in logged] == ["no idea", *(r["gold"] for r in logged[1:])]
    assert record.predictions_from == str(outputs / "ActionSequence" / "pred.json")
    assert record.data is not None and record.data.kind == "task-json"
    assert set(record.data.archives) == {"ActionSequence/ActionSequence.json"}
    assert not paths.out.joinpath("prepared").exists()

    verdict = json.loads(paths.verdict_json.read_text())
    assert len(verdict["cells"]) == 14
    # The report's aggregate uses `milebench aggregate`'s defaults: 2000 resamples seeded 0.
    aggregate = json.loads(paths.aggregate_json.read_text())
    assert (aggregate["resamples"], aggregate["seed"], verdict["resamples"], verdict["seed"]) == (
        2000,
        0,
        2000,
        0,
    )
    html = paths.report_html.read_text(encoding="utf-8")
    assert "No prompt was rebuilt for LLaVA-1.5-7B (multi-image, 29 tasks)" in html
    assert html.count("&Dagger;</sup>") == 29
    assert 'id="verdict-cells"' in html
    assert "no prompt rebuilt (task JSON alone)" in html
    tex = paths.report_tex.read_text(encoding="utf-8")
    assert r"\textbf{No prompt was rebuilt} for LLaVA-1.5-7B (multi-image, 29 tasks)" in tex


def test_a_malformed_pred_json_is_one_error_line_from_the_command(
    setup: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """Bad input reaches the user as the error's own line and exit 2, never as a traceback."""
    specs_dir, data, outputs = setup  # noqa: F811
    pred = outputs / "ActionSequence" / "pred.json"
    pred.write_text(json.dumps([{"sample_id": 1, "gt_response": "x"}]))
    argv = ["--specs", str(specs_dir), "import-official", "--run", "t", "--model", "random"]
    argv += ["--official-outputs", str(outputs), "--data-dir", str(data)]
    with caplog.at_level("ERROR"):
        assert cli.main(argv) == 2
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage() for r in errors] == [f"{pred}: record 0: pred_response: Field required"]
    assert errors[0].exc_info is None


def record_text(pred: str) -> str:
    return f'[{{"sample_id": 0, "gt_response": "the car is gone", "pred_response": {pred}}}]'


def write_bytes(data: bytes) -> Callable[[Path], object]:
    return lambda path: path.write_bytes(data)


HOSTILE: dict[str, tuple[Callable[[Path], object], str]] = {
    "latin-1": (
        write_bytes(record_text('"caf\xe9"').encode("latin-1")),
        "line 1: not UTF-8 text (byte 0xe9 at",
    ),
    "utf-16": (
        write_bytes(record_text('"gone"').encode("utf-16")),
        "line 1: not UTF-8 text (byte 0xff at offset 0): UTF-16, by its byte-order mark",
    ),
    "200,000-deep nesting": (
        write_bytes(record_text("[" * 200_000 + "]" * 200_000).encode()),
        "record 0 (line 1): lists or objects nested more than",
    ),
    "5,000-digit id": (
        write_bytes(record_text('"gone"').replace('"sample_id": 0', '"sample_id": ' + "7" * 5000).encode()),
        "record 0: sample_id: an integer of 5000 digits, more than can be read",
    ),
    "lone surrogate": (
        write_bytes(record_text('"gone \\ud800"').encode()),
        "record 0: pred_response: a lone surrogate ('\\ud800') at character 5, not Unicode text",
    ),
    "folder": (Path.mkdir, "<file>: not a regular file (a folder)"),
    "fifo": (os.mkfifo, "<file>: not a regular file (a fifo)"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_pred_json_is_one_named_error_exit_2_and_nothing_written(
    setup: tuple[Path, Path, Path], tmp_path: Path, case: str
) -> None:
    """The real command, in its own process with a deadline (a fifo without a writer must not block it):
    one error line naming the file (and the record and field), exit 2, no traceback, and nothing written,
    not even the predictions of the task whose pred.json is sound."""
    specs_dir, data, outputs = setup  # noqa: F811
    make, says = HOSTILE[case]
    pred = outputs / "Spot-the-Diff" / "pred.json"
    pred.parent.mkdir()
    make(pred)
    before = sorted(tmp_path.rglob("*"))
    argv = ["--specs", str(specs_dir), "import-official", "--run", "t", "--model", "random"]
    argv += ["--official-outputs", str(outputs), "--data-dir", str(data)]
    done = subprocess.run(
        [sys.executable, "-m", "milebench", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(errors) == 1 and f"{pred}: {says}" in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout
    assert sorted(tmp_path.rglob("*")) == before


def test_a_model_the_kit_does_not_know_is_imported_under_a_new_name(
    setup: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """--new-model writes the model's spec and adds it to the run, only once every file checked out."""
    specs_dir, data, outputs = setup  # noqa: F811
    argv = ["--specs", str(specs_dir), "import-official", "--run", "t", "--model", "my-old-run"]
    argv += ["--official-outputs", str(outputs), "--data-dir", str(data)]
    assert cli.main(argv) == 2  # without --new-model: an argument error naming the run's models
    assert "'my-old-run' is not part of run 't'" in caplog.text
    model_file = specs_dir / "models" / "my-old-run.yaml"

    pred = outputs / "ActionSequence" / "pred.json"
    good = pred.read_text()
    pred.write_text(json.dumps([official_record(0, "not the gold", "B")]))
    assert cli.main([*argv, "--new-model", "My old run"]) == 2
    assert not model_file.exists() and "my-old-run" not in (specs_dir / "runs" / "t.yaml").read_text()

    pred.write_text(good)
    assert cli.main([*argv, "--new-model", "My old run"]) == 0
    specs = load_specs(specs_dir)
    assert specs.models["my-old-run"].display_name == "My old run"
    assert specs.models["my-old-run"].section.value == "user"
    assert specs.run("t").models == ("random", "my-old-run")
    judgments = paths_of(specs_dir).judgments("my-old-run", "ActionSequence", Mode.MULTI_IMAGE)
    assert [j["extracted"] for j in read_jsonl(judgments) if j["scorer"] == "paper"] == ["B", "AC", None]
    assert cli.main([*argv, "--new-model"]) == 2  # a second time: the spec exists
    assert "model spec 'my-old-run' exists" in caplog.text


def test_a_new_model_is_never_written_into_the_shipped_specs(
    setup: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    _, data, outputs = setup
    argv = ["import-official", "--run", "smoke", "--model", "mine", "--new-model"]
    assert cli.main([*argv, "--official-outputs", str(outputs), "--data-dir", str(data)]) == 2
    assert "argument --new-model: writes the model's spec: give --specs a folder of your own" in caplog.text
    assert not (DEFAULT_SPECS / "models" / "mine.yaml").exists()


def test_jsonl_records_give_the_same_judgments_as_the_official_list(setup: tuple[Path, Path, Path]) -> None:
    specs_dir, data, outputs = setup  # noqa: F811
    argv = ["--specs", str(specs_dir), "import-official", "--run", "t", "--model", "random"]
    argv += ["--official-outputs", str(outputs), "--data-dir", str(data)]
    judgments = paths_of(specs_dir).judgments("random", "ActionSequence", Mode.MULTI_IMAGE)
    assert cli.main(argv) == 0
    from_list = [{k: v for k, v in j.items()} for j in read_jsonl(judgments)]
    pred = outputs / "ActionSequence" / "pred.json"
    lines = outputs / "ActionSequence" / "pred.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in json.loads(pred.read_text())) + "\n")
    assert cli.main(argv) == 2  # both files: which is meant is not guessed
    pred.unlink()
    assert cli.main(argv) == 0
    assert list(read_jsonl(judgments)) == from_list
    lines.write_text(lines.read_text().replace("}\n", "\n", 1))
    with pytest.raises(OfficialFormatError, match=r"pred\.jsonl: line 1: invalid JSON"):
        read_official(lines)
