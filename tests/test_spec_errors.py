"""Broken copies of the real specs folder: each error names the file and the field path."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from milebench.benchmarks.milebench.spec.data_lock import load_lock
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.cli import main
from milebench.commands.specs import check
from milebench.spec.base import SpecError
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.weights_lock import WEIGHTS_LOCK


@pytest.fixture
def specs_dir(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, root)
    return root


def _edit(path: Path, **changes: object) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _error(root: Path) -> str:
    with pytest.raises(SpecError) as err:
        check(argparse.Namespace(specs=root))
    return str(err.value)


def test_copy_of_real_specs_is_valid(specs_dir: Path) -> None:
    assert check(argparse.Namespace(specs=specs_dir)) == 0


def test_unknown_key(specs_dir: Path) -> None:
    path = specs_dir / "tasks" / "TQA.yaml"
    _edit(path, colour="red")
    message = _error(specs_dir)
    assert f"{path}: colour: Extra inputs are not permitted" in message


def test_wrong_type(specs_dir: Path) -> None:
    path = specs_dir / "tasks" / "WebQA.yaml"
    _edit(path, n_samples="many")
    assert f"{path}: n_samples:" in _error(specs_dir)


def test_nested_field_path(specs_dir: Path) -> None:
    path = specs_dir / "models" / "llava-1.5-7b.yaml"
    _edit(path, generation={"max_new_tokens": 4096})
    assert f"{path}: generation.max_new_tokens:" in _error(specs_dir)


def test_inconsistent_task_scorer(specs_dir: Path) -> None:
    path = specs_dir / "tasks" / "MMCoQA.yaml"
    _edit(path, scorer="rouge-l", metric="rouge-l")
    message = _error(specs_dir)
    assert str(path) in message and "official dispatch" in message


def test_unknown_model_in_run(specs_dir: Path) -> None:
    path = specs_dir / "runs" / "smoke.yaml"
    _edit(path, models=["random", "no-such-model"])
    assert f"{path}: models.1: unknown model 'no-such-model'" in _error(specs_dir)


def test_unknown_model_in_paper_row(specs_dir: Path) -> None:
    path = specs_dir / "paper.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["main_table"]["rows"][3]["model"] = "gemini-9"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    assert f"{path}: main_table.rows.3.model: unknown model 'gemini-9'" in _error(specs_dir)


def test_name_differs_from_file_stem(specs_dir: Path) -> None:
    path = specs_dir / "models" / "vila2.yaml"
    shutil.copy(specs_dir / "models" / "vila.yaml", path)
    assert f"{path}: name: 'vila' must equal the file name 'vila2'" in _error(specs_dir)


def test_invalid_yaml(specs_dir: Path) -> None:
    path = specs_dir / "runs" / "paper.yaml"
    path.write_text("name: paper\nmodels: [random, gpt-4v\n", encoding="utf-8")
    message = _error(specs_dir)
    assert f"{path}: line " in message and "invalid YAML" in message


def test_missing_data_lock(specs_dir: Path) -> None:
    (specs_dir / "locks" / "milebench-hub.lock.yaml").unlink()
    assert f"{specs_dir / 'runs' / 'paper.yaml'}: data.lock: no file" in _error(specs_dir)


def test_every_run_s_data_lock_is_checked_after_a_run_without_one(specs_dir: Path) -> None:
    """A run whose data has no lock (fixture) sorted before one whose lock is missing does not hide it."""
    runs = specs_dir / "runs"
    shutil.copy(runs / "smoke.yaml", runs / "a-first.yaml")
    _edit(runs / "a-first.yaml", name="a-first")
    (specs_dir / "locks" / "milebench-hub.lock.yaml").unlink()
    assert _error(specs_dir).startswith(f"{runs / 'paper.yaml'}: data.lock: no file ")


def test_weights_lock_for_api_model(specs_dir: Path) -> None:
    path = specs_dir / WEIGHTS_LOCK
    _edit(path, revisions={"gpt-4o": "a" * 40})
    assert f"{path}: revisions.gpt-4o:" in _error(specs_dir)


def test_load_specs_alone_reports_the_same_error(specs_dir: Path) -> None:
    path = specs_dir / "tasks" / "GPR1200.yaml"
    _edit(path, group="I-2")
    with pytest.raises(SpecError) as err:
        load_specs(specs_dir)
    assert err.value.path == path
    assert [field for field, _ in err.value.problems] == ["group"]


def test_check_specs_cli_exit_codes(specs_dir: Path) -> None:
    assert main(["--specs", str(specs_dir), "check-specs"]) == 0
    _edit(specs_dir / "tasks" / "TQA.yaml", colour="red")
    assert main(["--specs", str(specs_dir), "check-specs"]) == 2


def _set_line(path: Path, key: str, value: str) -> None:
    """Replace the ``key:`` line of a flat spec file, keeping its bytes otherwise as they are."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [f"{key}: {value}\n" if line.startswith(f"{key}:") else line for line in lines]
    path.write_text("".join(lines), encoding="utf-8")


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")


def _non_utf8(root: Path) -> tuple[Path, str]:
    path = root / "tasks" / "TQA.yaml"
    path.write_bytes(path.read_bytes().replace(b"display_name: TQA", b"display_name: TQA\xff"))
    return path, "line 2: not UTF-8 text (byte 0xff"


def _deep_nesting(root: Path) -> tuple[Path, str]:
    path = root / "runs" / "smoke.yaml"
    _set_line(path, "models", "[" * 5000 + "]" * 5000)
    return path, "line 6: invalid YAML: nested deeper than"


def _folder_named_like_a_spec(root: Path) -> tuple[Path, str]:
    path = root / "tasks" / "Extra.yaml"
    path.mkdir()
    return path, "<file>: not a regular file"


def _folder_named_like_the_weights_lock(root: Path) -> tuple[Path, str]:
    path = root / WEIGHTS_LOCK
    path.unlink()
    path.mkdir()
    return path, "<file>: not a regular file"


def _duplicate_key(root: Path) -> tuple[Path, str]:
    path = root / "tasks" / "TQA.yaml"
    _append(path, "n_samples: 100")
    return path, "line 13: invalid YAML: found duplicate key 'n_samples'"


def _bad_tagged_value(root: Path) -> tuple[Path, str]:
    path = root / "tasks" / "TQA.yaml"
    _set_line(path, "n_samples", "!!int many")
    return path, "line 9: invalid YAML: not a valid int: 'many'"


def _empty_tasks(root: Path) -> tuple[Path, str]:
    path = root / "runs" / "smoke.yaml"
    _set_line(path, "tasks", "[]")
    return path, "tasks.list: Tuple should have at least 1 item"


def _empty_modes(root: Path) -> tuple[Path, str]:
    path = root / "runs" / "smoke.yaml"
    _set_line(path, "modes", "[]")
    return path, "modes: Tuple should have at least 1 item"


def _empty_models(root: Path) -> tuple[Path, str]:
    path = root / "runs" / "smoke.yaml"
    _set_line(path, "models", "[]")
    return path, "models: Tuple should have at least 1 item"


def _repeated_model(root: Path) -> tuple[Path, str]:
    path = root / "runs" / "smoke.yaml"
    _set_line(path, "models", "[random, tiny-llava, random]")
    return path, "models: Value error, listed more than once: random"


def _bool_as_count(root: Path) -> tuple[Path, str]:
    path = root / "tasks" / "TQA.yaml"
    _set_line(path, "n_samples", "true")
    return path, "n_samples: Input should be a valid integer"


def _int_as_flag(root: Path) -> tuple[Path, str]:
    path = root / "tasks" / "TQA.yaml"
    _set_line(path, "has_adversarial", "1")
    return path, "has_adversarial: Input should be a valid boolean"


def _bool_as_number(root: Path) -> tuple[Path, str]:
    path = root / "runs" / "smoke.yaml"
    _append(path, "tolerance: true")
    return path, "tolerance: Input should be a valid number"


def _infinite_number(root: Path) -> tuple[Path, str]:
    path = root / "runs" / "smoke.yaml"
    _append(path, "tolerance: .inf")
    return path, "tolerance: Input should be a finite number"


def _paper_row_missing_a_group(root: Path) -> tuple[Path, str]:
    path = root / "paper.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    del data["main_table"]["rows"][2]["groups"]["N-2"]
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path, "main_table.rows.2: Value error, groups lacks N-2"


def _paper_footnote_for_no_model(root: Path) -> tuple[Path, str]:
    path = root / "paper.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["contamination"]["rows"][0]["model"] = "gpt-5"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path, "contamination.rows.0.model: unknown model 'gpt-5'"


def _no_task_specs(root: Path) -> tuple[Path, str]:
    for path in (root / "tasks").glob("*.yaml"):
        path.rename(path.with_suffix(".yml"))
    return root / "tasks", "<folder>: no *.yaml spec files"


def _group_category_disagree(root: Path) -> tuple[Path, str]:
    path = root / "tasks" / "TQA.yaml"
    _set_line(path, "category", "diagnostic")
    return path, "<root>: Value error, category diagnostic does not match group S-1"


def _unknown_task_in_run(root: Path) -> tuple[Path, str]:
    path = root / "runs" / "smoke.yaml"
    _set_line(path, "tasks", "[TQA, NoSuchTask]")
    return path, "tasks.1: unknown task 'NoSuchTask'"


BREAKS = [
    _non_utf8,
    _deep_nesting,
    _folder_named_like_a_spec,
    _folder_named_like_the_weights_lock,
    _duplicate_key,
    _bad_tagged_value,
    _empty_tasks,
    _empty_modes,
    _empty_models,
    _repeated_model,
    _bool_as_count,
    _int_as_flag,
    _bool_as_number,
    _infinite_number,
    _paper_row_missing_a_group,
    _paper_footnote_for_no_model,
    _no_task_specs,
    _group_category_disagree,
    _unknown_task_in_run,
]


@pytest.mark.parametrize("breaks", BREAKS, ids=lambda f: f.__name__.strip("_"))
def test_bad_spec_is_one_clear_error(
    specs_dir: Path, breaks: Callable[[Path], tuple[Path, str]], caplog: pytest.LogCaptureFixture
) -> None:
    """Each bad input: a SpecError naming file, field (or line) and problem; the CLI exits 2, no traceback."""
    path, expected = breaks(specs_dir)
    with pytest.raises(SpecError) as err:
        check(argparse.Namespace(specs=specs_dir))
    assert err.value.path == path
    assert f"{path}: {expected}" in str(err.value)
    caplog.clear()
    assert main(["check-specs", "--specs", str(specs_dir)]) == 2
    assert f"{path}: {expected}" in caplog.text
    assert "Traceback" not in caplog.text


def test_missing_specs_folder(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        load_specs(tmp_path / "nowhere")
    assert str(err.value) == f"{tmp_path / 'nowhere'}: <folder>: no such specs folder"


def test_data_lock_with_a_repository_and_no_revision(tmp_path: Path) -> None:
    path = tmp_path / "hub.lock.yaml"
    archive = {"name": "MileBench_part0.tar.gz", "size": 10, "sha256": "a" * 64}
    path.write_text(yaml.safe_dump({"repo_id": "org/MileBench", "revision": None, "archives": [archive]}))
    assert load_lock(path, require_complete=False).revision is None
    with pytest.raises(SpecError) as err:
        load_lock(path)
    assert [field for field, _ in err.value.problems] == ["revision"]
    assert str(err.value).startswith(f"{path}: revision: not resolved")
