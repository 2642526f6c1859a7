"""The tiny random-weight LLaVA: deterministic build, loading through the hf-llava adapter, generation."""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
from pathlib import Path

import pytest
from mini_specs import task_spec
from PIL import Image
from tiny_checks import same_seed_same_weights, weights_hash
from transformers import AutoProcessor, LlavaForConditionalGeneration

from milebench.benchmarks.milebench.data.schema import TaskFile
from milebench.benchmarks.milebench.infer import commands
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess import commands as preprocess_commands
from milebench.benchmarks.milebench.preprocess.prompt import build_sample
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.records import PreparedSample, read_prepared
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import Group, QuestionType, ScorerKind
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_llava import HfLlavaAdapter
from milebench.infer.records import IMAGE_PLACEHOLDER, FailureKind, Prediction
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import BUILDERS, LLAVA_HF_CHAT_TEMPLATE, build_tiny, build_tiny_llava
from milebench.io import read_jsonl, sha256_file
from milebench.spec.model import BuiltinModel, ModelSpec

TINY_LLAVA_ANSWERS = ["\\AE\ufffd~Gmbers", "\\Ch/d\ufffd\x0b\ufffd"]
"""The seeded checkpoint's greedy answers to ``samples`` (random weights: bytes, some of them not UTF-8)."""


def tiny_spec(seed: int = 0, n_tokens: int = 16) -> ModelSpec:
    return ModelSpec.model_validate(
        {
            "name": "tiny-llava",
            "display_name": "Tiny LLaVA",
            "section": "kit",
            "adapter": "hf-llava",
            "weights": {"kind": "tiny", "family": "llava", "seed": seed},
            "max_context_len": 2048,
            "n_tokens_per_image": n_tokens,
            "generation": {"max_new_tokens": 8},
        }
    )


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    root = tmp_path_factory.mktemp("run")
    run_paths = RunPaths(out=root, reports=root / "reports")
    build_tiny_llava(tiny_spec(), run_paths.model_dir("tiny-llava"))
    return run_paths


@pytest.fixture(scope="module")
def samples(paths: RunPaths) -> list[PreparedSample]:
    """Two prepared samples of an upstream-format task, with 1 and 3 images."""
    folder = paths.data_root / "SlideVQA"
    (folder / "images").mkdir(parents=True)
    for i, size in enumerate([(40, 30), (32, 32), (20, 50), (64, 64)]):
        Image.new("RGB", size, (60 * i, 255 - 50 * i, 30)).save(folder / "images" / f"{i}.png")

    def sample(sample_id: int, context: str, images: list[str]) -> dict[str, object]:
        instance = {"context": context, "images_path": images, "choice_list": ["red", "green"]}
        return {
            "sample_id": sample_id,
            "task_instruction_id": 0,
            "task_instance": instance,
            "response": "red",
            "image_quantity_level": "Few",
        }

    meta = {"task_instruction": ["Answer the question about the slides."], "question_type": "multi-choice"}
    data = [
        sample(0, "{image#1} What colour is the slide?", ["0.png"]),
        sample(1, "{image#1}{image#2} then {image#3}: which is red?", ["1.png", "2.png", "3.png"]),
    ]
    source = folder / "SlideVQA.json"
    source.write_text(json.dumps({"meta_data": meta, "data": data}))
    task = task_spec("SlideVQA", Group.S2, QuestionType.MULTI_CHOICE, ScorerKind.CHOICE, n_samples=2)
    task_file = TaskFile.model_validate_json(source.read_text())
    return [
        build_sample(task, task_file.meta_data, s, Mode.MULTI_IMAGE, paths.data_root, source)
        for s in task_file.data
    ]


@pytest.fixture(scope="module")
def adapter(paths: RunPaths) -> HfLlavaAdapter:
    loaded = load_adapter(tiny_spec(), paths, paths.data_root)
    assert isinstance(loaded, HfLlavaAdapter)
    return loaded


def test_same_seed_same_weights(paths: RunPaths, tmp_path: Path) -> None:
    folder = paths.model_dir("tiny-llava")
    same_seed_same_weights(lambda seed: tiny_spec(seed=seed), folder, tmp_path, LlavaForConditionalGeneration)
    assert (tmp_path / "again/tokenizer.json").read_bytes() == (
        paths.model_dir("tiny-llava") / "tokenizer.json"
    ).read_bytes()


def test_image_tokens_per_image(adapter: HfLlavaAdapter, samples: list[PreparedSample]) -> None:
    assert [len(s.images) for s in samples] == [1, 3]
    image_token_id = adapter.processor.image_token_id
    for sample in samples:
        inputs = adapter.encode([sample])
        assert int((inputs["input_ids"] == image_token_id).sum()) == 16 * len(sample.images)
        assert inputs["pixel_values"].shape == (len(sample.images), 3, 32, 32)
    batch = adapter.encode(samples)
    assert (batch["input_ids"] == image_token_id).sum(dim=1).tolist() == [16, 48]
    assert batch["attention_mask"][0, 0] == 0, "left padding expected for the shorter prompt"


def test_prompt_format(adapter: HfLlavaAdapter, samples: list[PreparedSample]) -> None:
    text = adapter.render(samples[1])
    assert text.startswith(
        "USER: Answer the question about the slides.\n<image>\n<image>\n then <image>: which"
    )
    assert text.endswith("Your answer is:  ASSISTANT:")
    assert IMAGE_PLACEHOLDER not in text


def test_llava_hf_template_keeps_images_in_prompt_order(
    paths: RunPaths, samples: list[PreparedSample], tmp_path: Path
) -> None:
    """The llava-hf templates put image parts before all text; the adapter sends image tokens in place."""
    with_template = RunPaths(out=tmp_path, reports=tmp_path)
    folder = with_template.model_dir("tiny-llava")
    shutil.copytree(paths.model_dir("tiny-llava"), folder)
    processor = AutoProcessor.from_pretrained(folder)
    processor.chat_template = LLAVA_HF_CHAT_TEMPLATE
    processor.save_pretrained(folder)
    adapter = load_adapter(tiny_spec(), with_template, paths.data_root)
    assert adapter.render(samples[1]) == (
        "USER: Answer the question about the slides.\n<image>\n<image>\n then <image>: which is red?\n"
        "Choice list: \nA. red\nB. green\nYour answer is:  ASSISTANT:"
    )
    assert adapter.generate(samples) == TINY_LLAVA_ANSWERS


def test_generate_is_deterministic(adapter: HfLlavaAdapter, samples: list[PreparedSample]) -> None:
    first = adapter.generate(samples)
    usage = adapter.last_usage()
    assert len(first) == 2
    assert first == TINY_LLAVA_ANSWERS
    assert adapter.generate(samples) == first
    assert [u.input_tokens for u in usage][1] > 48
    assert all(u.output_tokens is not None and 1 <= u.output_tokens <= 8 for u in usage)


def test_missing_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    empty = RunPaths(out=tmp_path, reports=tmp_path)
    with pytest.raises(
        AdapterError, match=r"'tiny-llava': no checkpoint .*milebench tiny-model --model tiny-llava"
    ):
        load_adapter(tiny_spec(), empty, tmp_path)


def test_every_tiny_family_has_a_builder_and_other_weights_are_refused(tmp_path: Path) -> None:
    for family, target in BUILDERS.items():  # every family a spec may name (the declared ones) builds
        module, name = target.split(":")
        assert callable(getattr(importlib.import_module(module), name)), family
    builtin = tiny_spec().model_copy(update={"weights": BuiltinModel(kind="builtin")})
    with pytest.raises(AdapterError, match="weights are 'builtin', not tiny"):
        build_tiny(builtin, tmp_path / "none")


def test_token_count_must_fit_the_tiny_tower(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="n_tokens_per_image 15"):
        build_tiny_llava(tiny_spec(n_tokens=15), tmp_path / "bad")


def test_tiny_model_command_installs_and_replaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = RunSpec(
        name="t",
        description="t",
        models=("tiny-llava",),
        data=FixtureSource(kind="fixture"),
        output_dir=str(tmp_path),
    )
    specs = Specs(tmp_path, {}, {"tiny-llava": tiny_spec()}, {"t": run})
    monkeypatch.setattr(commands, "load_specs", lambda _root: specs)
    args = argparse.Namespace(run="t", model="tiny-llava", specs=tmp_path, root=Path("."))
    target = RunPaths.for_run(run).model_dir("tiny-llava")
    assert commands.tiny_model(args) == 0
    first = weights_hash(target, LlavaForConditionalGeneration)
    (target / "stale.txt").write_text("from an older build")
    assert commands.tiny_model(args) == 0
    assert not (target / "stale.txt").exists()
    assert weights_hash(target, LlavaForConditionalGeneration) == first
    assert sorted(p.name for p in target.parent.iterdir()) == ["tiny-llava"]


def test_an_image_changed_after_preprocessing_fails_its_sample_and_the_rest_are_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prepared records carry each image's hash: an image changed (or gone) since must not be
    answered under the old cache key."""
    task = task_spec("SlideVQA", Group.S2, QuestionType.MULTI_CHOICE, ScorerKind.CHOICE, n_samples=3)
    run = RunSpec(
        name="t",
        description="t",
        models=("tiny-llava",),
        data=FixtureSource(kind="fixture"),
        output_dir=str(tmp_path),
    )
    specs = Specs(tmp_path, {task.name: task}, {"tiny-llava": tiny_spec()}, {"t": run})
    monkeypatch.setattr(preprocess_commands, "load_specs", lambda _root: specs)
    monkeypatch.setattr(commands, "load_specs", lambda _root: specs)
    paths = RunPaths.for_run(run)
    build_tiny_llava(tiny_spec(), paths.model_dir("tiny-llava"))
    folder = paths.data_root / task.name
    (folder / "images").mkdir(parents=True)
    for i in range(3):
        Image.new("RGB", (32, 32), (90 * i, 40, 200 - 90 * i)).save(folder / "images" / f"{i}.png")
    data = [
        {
            "sample_id": i,
            "task_instruction_id": 0,
            "task_instance": {
                "context": "{image#1} Which colour?",
                "images_path": [f"{i}.png"],
                "choice_list": ["red", "blue"],
            },
            "response": "red",
            "image_quantity_level": "Few",
        }
        for i in range(3)
    ]
    meta = {"task_instruction": ["Answer."], "question_type": "multi-choice"}
    (folder / "SlideVQA.json").write_text(json.dumps({"meta_data": meta, "data": data}))
    regime = model_regime(specs, run, "tiny-llava", Mode.MULTI_IMAGE).id
    args = argparse.Namespace(
        run="t",
        model="tiny-llava",
        task=task.name,
        mode=Mode.MULTI_IMAGE,
        specs=tmp_path,
        root=Path("."),
        regime=regime,
        workers=1,
        threads=1,
    )
    assert preprocess_commands.preprocess(args) == 0
    prepared = {
        s.sample_id: s
        for s in read_prepared(paths.prepared(task.name, Mode.MULTI_IMAGE, regime), "preprocess")
    }
    changed = folder / "images" / "1.png"
    Image.new("RGB", (32, 32), (0, 255, 0)).save(changed)

    assert commands.infer(argparse.Namespace(**{**vars(args), "task": [task.name]})) == 3, (
        "one of three samples failed, over the run's failure limit"
    )
    out = paths.predictions("tiny-llava", task.name, Mode.MULTI_IMAGE)
    saved = {p.sample_id: p for p in map(Prediction.model_validate, read_jsonl(out))}
    assert saved[1].failure is FailureKind.ADAPTER_ERROR and saved[1].response is None
    detail = saved[1].failure_detail or ""
    assert "sample 1" in detail and "SlideVQA/images/1.png" in detail
    assert prepared[1].image_sha256[0] in detail and sha256_file(changed) in detail
    assert all(saved[i].failure is None and saved[i].response for i in (0, 2))
