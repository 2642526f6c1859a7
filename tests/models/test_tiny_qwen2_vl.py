"""The tiny random-weight Qwen2-VL through the hf-qwen2-vl adapter: a hub-style checkpoint, image sizing
from the spec's token budget, image pad expansion, deterministic generation, the whole fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from picture_samples import picture_sample
from PIL import Image
from tiny_checks import answers_every_fixture_task, same_seed_same_weights, tiny_run
from transformers import Qwen2VLForConditionalGeneration, Qwen2VLProcessor
from transformers.processing_utils import ProcessorMixin

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_qwen2_vl import HfQwen2VLAdapter
from milebench.infer.registry import load_adapter
from milebench.spec.model import ModelSpec

SIZES = [(40, 30), (32, 32), (20, 50), (500, 90)]
"""Width x height; with 16 pixels per merged token and a budget of 4 tokens: 4, 4, 3 and 4 tokens."""


def spec(n_tokens: int = 4, seed: int = 0) -> ModelSpec:
    fields = load_specs().models["tiny-qwen2-vl"].model_dump()
    fields.update(n_tokens_per_image=n_tokens, weights={"kind": "tiny", "family": "qwen2-vl", "seed": seed})
    return ModelSpec.model_validate(fields)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    root = tmp_path_factory.mktemp("qwen2vl")
    return tiny_run(root, spec(), SIZES)


@pytest.fixture(scope="module")
def adapter(paths: RunPaths) -> HfQwen2VLAdapter:
    loaded = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(loaded, HfQwen2VLAdapter)
    return loaded


def test_checkpoint_has_the_hub_layout_and_seeded_weights(paths: RunPaths, tmp_path: Path) -> None:
    folder = paths.model_dir("tiny-qwen2-vl")
    assert {"config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json"} <= {
        p.name for p in folder.iterdir()
    }
    same_seed_same_weights(lambda seed: spec(seed=seed), folder, tmp_path, Qwen2VLForConditionalGeneration)


def test_prompt_follows_the_qwen_chat_format(adapter: HfQwen2VLAdapter) -> None:
    assert isinstance(adapter.model, Qwen2VLForConditionalGeneration)
    assert adapter.render(picture_sample(0, 2)) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nAnswer.\n"
        "<|vision_start|><|image_pad|><|vision_end|> slide 0 "
        "<|vision_start|><|image_pad|><|vision_end|> slide 1 which is red?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_each_image_costs_at_most_the_spec_budget(adapter: HfQwen2VLAdapter) -> None:
    inputs = adapter.encode([picture_sample(0, 4), picture_sample(1, 1)])
    grid = inputs["image_grid_thw"].tolist()
    assert [t * h * w // 4 for t, h, w in grid] == [4, 4, 3, 4, 4]
    pads = (inputs["input_ids"] == adapter.processor.image_token_id).sum(dim=1).tolist()
    assert pads == [15, 4]
    assert inputs["attention_mask"][1, 0] == 0, "left padding expected for the shorter prompt"


def test_a_larger_budget_gives_more_tokens_per_image(paths: RunPaths) -> None:
    wide = load_adapter(spec(n_tokens=16), paths, paths.data_root)
    grid = wide.encode([picture_sample(0, 4)])["image_grid_thw"].tolist()
    assert [t * h * w // 4 for t, h, w in grid] == [4, 4, 3, 9], "only the large picture grows"


def test_inputs_equal_the_model_processors(
    adapter: HfQwen2VLAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transformers Qwen2VLProcessor, built without its video half (only its type check needs
    torchvision), gives the same tensors, so the model sees exactly what its own processor makes."""
    check = ProcessorMixin.check_argument_for_proper_class
    monkeypatch.setattr(
        ProcessorMixin,
        "check_argument_for_proper_class",
        lambda self, name, arg: None if name == "video_processor" and arg is None else check(self, name, arg),
    )
    inputs = adapter.processor
    real = Qwen2VLProcessor(
        image_processor=inputs.image_processor,
        tokenizer=inputs.tokenizer,
        video_processor=None,
        chat_template=inputs.tokenizer.chat_template,
    )
    batch = [picture_sample(0, 4), picture_sample(1, 1)]
    texts = [adapter.render(s) for s in batch]
    images = [image for s in batch for image in adapter.load_images(s)]
    ours = inputs(text=texts, images=images, return_tensors="pt", padding=True)
    sizing = {"size": inputs.size}
    theirs = real(text=texts, images=images, return_tensors="pt", padding=True, images_kwargs=sizing)
    assert sorted(ours) == sorted(theirs)
    for name in theirs:
        assert torch.equal(ours[name], theirs[name]), name


def test_image_slots_must_match_the_images(adapter: HfQwen2VLAdapter) -> None:
    text = adapter.render(picture_sample(0, 1))
    two = [Image.new("RGB", (32, 32)), Image.new("RGB", (32, 32))]
    with pytest.raises(AdapterError, match="1 image slots for 2 images"):
        adapter.processor(text=[text], images=two, return_tensors="pt", padding=True)


def test_generation_is_deterministic_and_batch_independent(
    adapter: HfQwen2VLAdapter, paths: RunPaths
) -> None:
    batch = [picture_sample(0, 4), picture_sample(1, 1)]
    first = adapter.generate(batch)
    assert all(isinstance(a, str) for a in first)
    usage = adapter.last_usage()
    assert usage[0].input_tokens is not None and usage[0].input_tokens > 15
    assert all(u.output_tokens is not None and 1 <= u.output_tokens <= 8 for u in usage)
    assert adapter.generate(batch) == first
    assert adapter.generate([picture_sample(1, 1)]) == first[1:]
    assert load_adapter(spec(), paths, paths.data_root).generate(batch) == first


@pytest.mark.slow
def test_answers_every_fixture_task_through_the_engine(tmp_path: Path) -> None:
    answers_every_fixture_task(spec(), tmp_path)
