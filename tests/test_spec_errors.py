"""Broken copies of the real specs folder: each error names the file and the field path."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
import yaml

from milebench.cli import main
from milebench.spec.base import SpecError
from milebench.spec.commands import WEIGHTS_LOCK, check
from milebench.spec.registry import DEFAULT_SPECS, load_specs


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
