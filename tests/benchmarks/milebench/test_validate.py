"""``validate_tree`` and ``milebench validate-data``: each defect is found and named precisely."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest
from mini_specs import MINI_TASKS

from milebench.benchmarks.milebench.data.validate import Problem, validate_tree
from milebench.benchmarks.milebench.fixture.generate import write_tree
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.cli import main

SAMPLES = 3
TASK = "ActionSequence"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("pristine"), MINI_TASKS, seed=1, samples_per_task=SAMPLES)


@pytest.fixture
def tree(pristine: Path, tmp_path: Path) -> Path:
    """A private copy of the generated tree that a test may damage."""
    return Path(shutil.copytree(pristine, tmp_path / "MileBench"))


def edit_json(tree: Path, task: str, change, adversarial: bool = False) -> None:
    path = tree / task / f"{task}{'-adv' if adversarial else ''}.json"
    content = json.loads(path.read_text())
    change(content)
    path.write_text(json.dumps(content))


def problems(tree: Path, expected: int | None = SAMPLES) -> list[str]:
    return [str(p) for p in validate_tree(tree, MINI_TASKS, expected_samples=expected)]


def test_generated_tree_is_clean(tree):
    assert problems(tree) == []


def test_missing_image_names_task_sample_and_file(tree):
    sample = json.loads((tree / TASK / f"{TASK}.json").read_text())["data"][1]
    name = sample["task_instance"]["images_path"][-1]
    (tree / TASK / "images" / name).unlink()
    found = validate_tree(tree, MINI_TASKS, expected_samples=SAMPLES)
    # the adversarial set refers to the same image, so both files report it
    assert found == [
        Problem(TASK, f"{TASK}/{TASK}{suffix}.json", "sample 1", f"file {TASK}/images/{name} not found")
        for suffix in ("", "-adv")
    ]


def test_missing_combined_image_is_reported(tree):
    (tree / "GPR1200" / "combined_1_images" / "2-0.jpg").unlink()
    assert problems(tree) == [
        "GPR1200/GPR1200.json: sample 2: file GPR1200/combined_1_images/2-0.jpg not found"
    ]


def test_deleted_response_is_reported_as_field_path(tree):
    edit_json(tree, TASK, lambda c: c["data"][1].pop("response"))
    assert problems(tree) == [f"{TASK}/{TASK}.json: data.1.response: Field required"]


def test_deleted_images_path_is_reported_as_field_path(tree):
    edit_json(tree, TASK, lambda c: c["data"][2]["task_instance"].pop("images_path"), adversarial=True)
    assert problems(tree) == [f"{TASK}/{TASK}-adv.json: data.2.task_instance.images_path: Field required"]


def test_instruction_id_out_of_range(tree):
    def change(content):
        content["data"][0]["task_instruction_id"] = len(content["meta_data"]["task_instruction"])

    edit_json(tree, "SlideVQA", change)
    (found,) = problems(tree)
    assert found.startswith("SlideVQA/SlideVQA.json: sample 0: task_instruction_id 2 out of range")


def test_placeholder_beyond_image_list(tree):
    def change(content):
        instance = content["data"][2]["task_instance"]
        instance["context"] += f" {{table#{len(instance['images_path']) + 1}}}"

    edit_json(tree, "Spot-the-Diff", change)
    (found,) = problems(tree)
    assert found.startswith("Spot-the-Diff/Spot-the-Diff.json: sample 2: placeholder {table#")
    assert "in context but images_path has" in found


def test_response_not_among_options(tree):
    edit_json(tree, TASK, lambda c: c["data"][0].update(response="none of these"), adversarial=True)
    assert problems(tree) == [
        f"{TASK}/{TASK}-adv.json: sample 0: response 'none of these' is not one of task_instance.choice_list"
    ]


def test_wrong_quantity_level(tree):
    def change(content):
        sample = content["data"][0]
        sample["image_quantity_level"] = "Many" if sample["image_quantity_level"] != "Many" else "Few"

    edit_json(tree, "MMCoQA", change)
    (found,) = problems(tree)
    assert found.startswith("MMCoQA/MMCoQA.json: sample 0: image_quantity_level ")


def test_duplicate_sample_ids(tree):
    edit_json(tree, "GPR1200", lambda c: c["data"][1].update(sample_id=0))
    assert problems(tree) == ["GPR1200/GPR1200.json: sample 0: sample_id used 2 times"]


def test_question_type_must_match_spec(tree):
    edit_json(tree, "TextNeedleInAHaystack", lambda c: c["meta_data"].update(question_type="multi-choice"))
    (found,) = problems(tree)
    assert found.startswith("TextNeedleInAHaystack/TextNeedleInAHaystack.json: meta_data.question_type:")


def test_sample_count_against_spec_and_override(tree):
    found = problems(tree, expected=None)
    assert f"{TASK}/{TASK}.json: data: {SAMPLES} samples, expected 200" in found
    assert len(found) == len(MINI_TASKS)


def test_adversarial_count_must_match(tree):
    edit_json(tree, TASK, lambda c: c["data"].pop(), adversarial=True)
    assert problems(tree) == [
        f"{TASK}/{TASK}-adv.json: data: {SAMPLES - 1} samples, the test set has {SAMPLES}"
    ]


def test_adversarial_file_present_iff_spec_has_one(tree):
    (tree / TASK / f"{TASK}-adv.json").unlink()
    shutil.copy(tree / "GPR1200" / "GPR1200.json", tree / "GPR1200" / "GPR1200-adv.json")
    assert problems(tree) == [
        f"{TASK}/{TASK}-adv.json: <file>: file not found",
        "GPR1200/GPR1200-adv.json: <file>: adversarial file present but the spec has none",
    ]


def test_missing_folder_and_broken_json(tree):
    shutil.rmtree(tree / "MMCoQA")
    (tree / "SlideVQA" / "SlideVQA.json").write_text('{"meta_data": ')
    found = problems(tree)
    assert found[0].startswith("SlideVQA/SlideVQA.json: <file>: invalid JSON:")
    assert found[1] == f"MMCoQA: <folder>: task folder missing under {tree}"
    assert len(found) == 2


def test_command_logs_each_problem_and_fails(tmp_path, caplog):
    tree = write_tree(tmp_path, load_specs().tasks.values(), seed=0, samples_per_task=2)
    assert main(["validate-data", str(tree), "--samples-per-task", "2"]) == 0
    (tree / "nuscenes" / "images" / "0_1.jpg").unlink()
    edit_json(tree, "WebQA", lambda c: c["data"][0].pop("response"))
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert main(["validate-data", str(tree), "--samples-per-task", "2"]) == 1
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "nuscenes/nuscenes.json: sample 0: file nuscenes/images/0_1.jpg not found" in messages
    assert "WebQA/WebQA.json: data.0.response: Field required" in messages
    assert messages[-1] == f"3 problems in {tree}"


@pytest.mark.parametrize("kind", ["relative", "absolute", "symlink"])
def test_image_outside_the_task_folder_is_refused(tree, tmp_path, kind):
    """A real image outside the tree, reached by ``..``, an absolute path or a symlink, is an error."""
    outside = tmp_path / "private" / "x.jpg"
    outside.parent.mkdir()
    shutil.copy(tree / TASK / "images" / "0_1.jpg", outside)
    images = tree / TASK / "images"
    name = {"relative": os.path.relpath(outside, images), "absolute": str(outside), "symlink": "link.jpg"}[
        kind
    ]
    if kind == "symlink":
        (images / name).symlink_to(outside)
    edit_json(tree, TASK, lambda c: c["data"][1]["task_instance"]["images_path"].__setitem__(0, name))
    why = (
        f"is an absolute path; entries name files under {TASK}/images/"
        if kind == "absolute"
        else f"resolves outside {TASK}/images/ (to {outside.resolve()})"
    )
    assert problems(tree) == [f"{TASK}/{TASK}.json: sample 1: task_instance.images_path entry {name!r} {why}"]


def test_combined_picture_outside_its_folder_is_refused(tree):
    name = "../images/0_1.jpg"  # a real file of the task, but not in combined_1_images/
    edit_json(tree, "GPR1200", lambda c: c["data"][0]["task_instance"].update(combined_1_images=[name]))
    assert problems(tree) == [
        f"GPR1200/GPR1200.json: sample 0: task_instance.combined_1_images entry {name!r} "
        f"resolves outside GPR1200/combined_1_images/ (to {(tree / 'GPR1200/images/0_1.jpg').resolve()})"
    ]
