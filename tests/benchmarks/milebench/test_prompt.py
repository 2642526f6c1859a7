"""Prompt building: golden strings equal to the official MileBenchDataset output (unlimited context)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from milebench.benchmarks.milebench.data.schema import TaskFile
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess import commands
from milebench.benchmarks.milebench.preprocess.prompt import PreprocessError, build_sample
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import TaskSpec
from milebench.io import read_jsonl, sha256_file, sha256_text
from milebench.spec.model import ModelSpec

INSTRUCTION = "Answer the question."


def task_spec(name: str = "WebQA", open_ended: bool = False, **kw: Any) -> TaskSpec:
    fields: dict[str, Any] = {
        "name": name,
        "display_name": name,
        "group": "S-1",
        "group_name": "Knowledge Grounded QA",
        "category": "realistic-semantic",
        "question_type": "multi-choice",
        "metric": "accuracy",
        "scorer": "choice",
        "n_samples": 1,
        "has_adversarial": True,
        "source_dataset": "test",
    }
    if open_ended:
        fields.update(
            group="S-3", group_name="Visual Relation Inference", question_type="open-ended", metric="rouge-l"
        )
        fields["scorer"] = "rouge-l"
    fields.update(kw)
    return TaskSpec.model_validate(fields)


def sample_json(
    context: str,
    images: list[str],
    choices: list[str] | None = None,
    response: str = "cat",
    instruction_id: int = 0,
    sample_id: int = 7,
) -> dict[str, Any]:
    instance: dict[str, Any] = {"context": context, "images_path": images, "combined_1_images": ["c7.jpg"]}
    if choices is not None:
        instance["choice_list"] = choices
    return {
        "sample_id": sample_id,
        "task_instruction_id": instruction_id,
        "task_instance": instance,
        "response": response,
        "image_quantity_level": "Few",
    }


def write_task(
    root: Path,
    task: str,
    samples: list[dict[str, Any]],
    question_type: str = "multi-choice",
    suffix: str = "",
) -> Path:
    """Write ``<task>/<task><suffix>.json`` plus every image it names, in the upstream layout."""
    folder = root / task
    for sub in ("images", "combined_1_images"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(samples):
        inst = s["task_instance"]
        for j, name in enumerate(inst["images_path"]):
            Image.new("RGB", (8, 8), (i * 40, j * 40, 90)).save(folder / "images" / name)
        for name in inst.get("combined_1_images", []):
            Image.new("RGB", (16, 16), (200, i, 0)).save(folder / "combined_1_images" / name)
    meta = {"task_instruction": [INSTRUCTION, "Say it."], "question_type": question_type, "dataset": task}
    path = folder / f"{task}{suffix}.json"
    path.write_text(json.dumps({"meta_data": meta, "data": samples}), encoding="utf-8")
    return path


def build_one(
    tmp_path: Path, spec: TaskSpec, sample: dict[str, Any], mode: Mode = Mode.MULTI_IMAGE
) -> PreparedSample:
    qtype = spec.question_type.value
    source = write_task(tmp_path, spec.name, [sample], qtype)
    task_file = TaskFile.model_validate_json(source.read_text())
    return build_sample(spec, task_file.meta_data, task_file.data[0], mode, tmp_path, source)


def test_multi_choice_golden(tmp_path: Path) -> None:
    s = build_one(
        tmp_path,
        task_spec(),
        sample_json("{image#1}What is shown in {image#2}?", ["a.png", "b.png"], ["cat", "dog"]),
    )
    expected = (
        "Answer the question.\n<ImageHere>What is shown in <ImageHere>?"
        "\nChoice list: \nA. cat\nB. dog\nYour answer is: "
    )
    assert s.prompt == expected
    assert s.instruction == INSTRUCTION
    assert s.images == ("WebQA/images/a.png", "WebQA/images/b.png")
    assert s.image_sha256 == tuple(sha256_file(tmp_path / p) for p in s.images)
    assert s.image_sha256[0] != s.image_sha256[1]
    assert s.prompt_sha256 == sha256_text(expected)
    assert s.choices == ("cat", "dog")
    assert s.labelled_choices
    assert (s.response, s.n_images, s.sample_id, s.mode) == ("cat", 2, 7, Mode.MULTI_IMAGE)


def test_unlabelled_choices_golden(tmp_path: Path) -> None:
    spec = task_spec(
        "GPR1200", group="I-1", group_name="Image Retrieval", category="diagnostic", labelled_choices=False
    )
    s = build_one(
        tmp_path,
        spec,
        sample_json("Which matches {image#1}?", ["q.png", "c1.png", "c2.png"], ["x", "y"], "y"),
    )
    assert s.prompt == (
        "Answer the question.\n<ImageHere>Which matches <ImageHere>?\nChoice list: \nx\ny\nYour answer is: "
    )
    assert s.images == ("GPR1200/images/c1.png", "GPR1200/images/c2.png")
    assert not s.labelled_choices


def test_open_ended_golden(tmp_path: Path) -> None:
    spec = task_spec("Spot-the-Diff", open_ended=True)
    s = build_one(
        tmp_path, spec, sample_json("{image#1}{image#2}What differs?", ["a.png", "b.png"], None, "a car")
    )
    assert s.prompt == "Answer the question.\n<ImageHere><ImageHere>What differs?"
    assert s.choices is None
    assert s.question_type.value == "open-ended"


def test_table_reference_golden(tmp_path: Path) -> None:
    spec = task_spec("MultiModalQA")
    sample = sample_json(
        "{table#1} lists values; {image#2} plots them.", ["t.png", "p.png"], ["1", "2"], "1", 1
    )
    s = build_one(tmp_path, spec, sample)
    assert s.prompt == (
        "Say it.\n<ImageHere> lists values; <ImageHere> plots them."
        "\nChoice list: \nA. 1\nB. 2\nYour answer is: "
    )
    assert s.images == ("MultiModalQA/images/t.png", "MultiModalQA/images/p.png")


def test_fewer_placeholders_than_images_pairs_from_the_end(tmp_path: Path) -> None:
    spec = task_spec("ALFRED", open_ended=True)
    s = build_one(
        tmp_path, spec, sample_json("{image#2} What changed?", ["a.png", "b.png", "c.png"], None, "x")
    )
    assert s.prompt == "Answer the question.\n<ImageHere><ImageHere> What changed?"
    assert s.images == ("ALFRED/images/b.png", "ALFRED/images/c.png")
    assert s.n_images == 3
    assert len(s.image_sha256) == 2


def test_no_placeholder_keeps_last_image(tmp_path: Path) -> None:
    spec = task_spec("ALFRED", open_ended=True)
    s = build_one(tmp_path, spec, sample_json("Describe.", ["a.png", "b.png", "c.png"], None, "x"))
    assert s.prompt == "Answer the question.\n<ImageHere>Describe."
    assert s.images == ("ALFRED/images/c.png",)


def test_combined_mode_golden(tmp_path: Path) -> None:
    sample = sample_json("{image#1}What is shown in {image#2}?", ["a.png", "b.png"], ["cat", "dog"])
    s = build_one(tmp_path, task_spec(), sample, Mode.COMBINED_IMAGE)
    assert s.prompt == (
        "<ImageHere>\nAnswer the question.\n<Image 1> What is shown in <Image 2> ?"
        "\nChoice list: \nA. cat\nB. dog\nYour answer is: "
    )
    assert s.instruction == "<ImageHere>\nAnswer the question."
    assert s.images == ("WebQA/combined_1_images/c7.jpg",)
    assert s.image_sha256 == (sha256_file(tmp_path / "WebQA/combined_1_images/c7.jpg"),)
    assert s.n_images == 2
    assert s.prompt_sha256 == sha256_text(s.prompt)


def test_missing_image_names_task_sample_and_file(tmp_path: Path) -> None:
    spec = task_spec()
    source = write_task(tmp_path, "WebQA", [sample_json("{image#1}", ["a.png"], ["cat"])])
    (tmp_path / "WebQA/images/a.png").unlink()
    task_file = TaskFile.model_validate_json(source.read_text())
    with pytest.raises(
        PreprocessError, match=r"WebQA\.json: task WebQA, sample 7: image file not found: .*a\.png"
    ):
        build_sample(spec, task_file.meta_data, task_file.data[0], Mode.MULTI_IMAGE, tmp_path, source)


def test_unreadable_image_names_task_sample_and_file(tmp_path: Path) -> None:
    spec = task_spec()
    source = write_task(tmp_path, "WebQA", [sample_json("{image#1}", ["a.png"], ["cat"])])
    (tmp_path / "WebQA/images/a.png").write_bytes(b"not an image")
    task_file = TaskFile.model_validate_json(source.read_text())
    with pytest.raises(
        PreprocessError, match=r"WebQA\.json: task WebQA, sample 7: Pillow cannot open image .*a\.png"
    ):
        build_sample(spec, task_file.meta_data, task_file.data[0], Mode.MULTI_IMAGE, tmp_path, source)


def test_instruction_id_out_of_range(tmp_path: Path) -> None:
    with pytest.raises(
        PreprocessError, match=r"WebQA\.json: task WebQA, sample 7: task_instruction_id 5 is out of range"
    ):
        build_one(tmp_path, task_spec(), sample_json("{image#1}", ["a.png"], ["cat"], instruction_id=5))


def test_placeholder_beyond_images(tmp_path: Path) -> None:
    with pytest.raises(
        PreprocessError, match=r"task WebQA, sample 7: context refers to \{table#3\} but the sample has 2"
    ):
        build_one(tmp_path, task_spec(), sample_json("{image#1}{table#3}", ["a.png", "b.png"], ["cat"]))


def test_combined_mode_needs_one_picture(tmp_path: Path) -> None:
    sample = sample_json("{image#1}", ["a.png"], ["cat"])
    sample["task_instance"]["combined_1_images"] = []
    with pytest.raises(PreprocessError, match="sample 7: combined-image mode needs exactly one"):
        build_one(tmp_path, task_spec(), sample, Mode.COMBINED_IMAGE)


def minimal_specs(root: Path, out: Path, tasks: list[TaskSpec]) -> Specs:
    """Specs for handler tests, built in code (the handlers only read tasks, models and the run)."""
    run = RunSpec(
        name="t",
        description="test",
        models=("random",),
        data=FixtureSource(kind="fixture"),
        output_dir=str(out),
    )
    random = ModelSpec.model_validate(
        {
            "name": "random",
            "display_name": "Random",
            "section": "baseline",
            "adapter": "random",
            "weights": {"kind": "builtin"},
        }
    )
    models = {"random": random}
    return Specs(root=root, tasks={t.name: t for t in tasks}, models=models, runs={"t": run})


def test_preprocess_adversarial_reads_adv_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = minimal_specs(
        tmp_path,
        tmp_path / "out",
        [
            task_spec(),
            task_spec("GPR1200", group="I-1", group_name="IR", category="diagnostic", has_adversarial=False),
        ],
    )
    paths = RunPaths.for_run(specs.runs["t"])
    write_task(paths.data_root, "WebQA", [sample_json("{image#1}Q?", ["a.png"], ["cat", "dog"], "cat")])
    write_task(
        paths.data_root,
        "WebQA",
        [sample_json("{image#1}Q?", ["a.png"], ["dog", "cat"], "a cat")],
        suffix="-adv",
    )
    monkeypatch.setattr(commands, "load_specs", lambda _root: specs)

    args = argparse.Namespace(
        run="t", task="WebQA", mode=Mode.ADVERSARIAL, specs=tmp_path, root=Path("."), regime="full", workers=1
    )
    assert commands.preprocess(args) == 0
    rows = list(read_jsonl(paths.prepared("WebQA", Mode.ADVERSARIAL)))
    assert len(rows) == 1
    s = PreparedSample.model_validate(rows[0])
    assert s.response == "a cat"
    assert s.mode is Mode.ADVERSARIAL
    assert s.prompt.endswith("\nA. dog\nB. cat\nYour answer is: ")

    args.mode = Mode.MULTI_IMAGE
    assert commands.preprocess(args) == 0
    regular = PreparedSample.model_validate(next(read_jsonl(paths.prepared("WebQA", Mode.MULTI_IMAGE))))
    assert regular.response == "cat"


def test_preprocess_adversarial_without_adv_set_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    spec = task_spec("GPR1200", group="I-1", group_name="IR", category="diagnostic", has_adversarial=False)
    specs = minimal_specs(tmp_path, tmp_path / "out", [spec])
    monkeypatch.setattr(commands, "load_specs", lambda _root: specs)
    args = argparse.Namespace(
        run="t",
        task="GPR1200",
        mode=Mode.ADVERSARIAL,
        specs=tmp_path,
        root=Path("."),
        regime="full",
        workers=1,
    )
    with caplog.at_level(logging.ERROR):
        assert commands.preprocess(args) == 1
    assert "task GPR1200 has no adversarial set" in caplog.text
    assert not RunPaths.for_run(specs.runs["t"]).prepared("GPR1200", Mode.ADVERSARIAL).exists()


def test_needle_golden(tmp_path: Path) -> None:
    spec = task_spec(
        "TextNeedleInAHaystack", True, group="N-1", category="diagnostic", scorer="needle", metric="accuracy"
    )
    context = "{image#1}The secret word is hidden here. {image#2}What is the secret word?"
    s = build_one(tmp_path, spec, sample_json(context, ["h1.jpg", "h2.jpg"], None, "plum"))
    assert s.prompt == (
        "Answer the question.\n<ImageHere>The secret word is hidden here. <ImageHere>What is the secret word?"
    )
    assert s.truncation is not None and s.truncation.mode is None and s.truncation.images_kept == 2


def test_dialogue_golden(tmp_path: Path) -> None:
    spec = task_spec(
        "MMCoQA", True, group="S-4", group_name="Dialogue", scorer="substring", metric="accuracy"
    )
    context = "Q: who built it?\nA: the Romans\n{table#1}{image#2}Q: when?"
    s = build_one(tmp_path, spec, sample_json(context, ["t.png", "i.jpg"], None, "in 80 AD"))
    assert s.prompt == "Answer the question.\nQ: who built it?\nA: the Romans\n<ImageHere><ImageHere>Q: when?"
    assert s.images == ("MMCoQA/images/t.png", "MMCoQA/images/i.jpg")


def test_repeated_reference_gives_more_placeholders_than_images(tmp_path: Path) -> None:
    """Both copies of {image#1} become placeholders; the walk pairs only the one image, from the end."""
    s = build_one(tmp_path, task_spec(), sample_json("{image#1}A{image#1}B", ["a.png"], ["x", "y"], "x"))
    assert s.context.startswith("<ImageHere>A<ImageHere>B\nChoice list: ")
    assert s.images == ("WebQA/images/a.png",)


def test_references_pair_by_position_not_number(tmp_path: Path) -> None:
    s = build_one(tmp_path, task_spec(), sample_json("{image#2}X{image#1}Y", ["a.png", "b.png"], ["x"], "x"))
    assert s.context.startswith("<ImageHere>X<ImageHere>Y")
    assert s.images == ("WebQA/images/a.png", "WebQA/images/b.png")


def test_malformed_references_stay_verbatim(tmp_path: Path) -> None:
    context = "{image#1}see {image#1 and {image 2} and {Image#2}"
    s = build_one(tmp_path, task_spec(), sample_json(context, ["a.png", "b.png"], ["x"], "x"))
    assert s.context.startswith("<ImageHere><ImageHere>see {image#1 and {image 2} and {Image#2}\nChoice")
    assert s.truncation is not None and s.truncation.images_unpaired == 0


def test_combined_mode_with_kit_pictures_golden(tmp_path: Path) -> None:
    sample = sample_json("{image#1}A {table#2}B", ["a.png", "b.png"], None, "x")
    spec = task_spec("ALFRED", open_ended=True)
    source = write_task(tmp_path, spec.name, [sample], "open-ended")
    task_file = TaskFile.model_validate_json(source.read_text())
    pictures = ["ALFRED/images/a.png", "ALFRED/images/b.png"]  # stand-ins for two kit pictures
    s = build_sample(
        spec, task_file.meta_data, task_file.data[0], Mode.COMBINED_IMAGE, tmp_path, source, pictures=pictures
    )
    assert s.prompt == "<ImageHere><ImageHere>\nAnswer the question.\n<Image 1> A <Image 2> B"
    assert s.images == tuple(pictures) and s.truncation is not None and s.truncation.images_kept == 2
