"""The tiny random-weight LLaVA-NeXT through the hf-llava-next adapter: a llava-hf style checkpoint, image
tokens kept in prompt order despite the hub template, any-res token counts, batching, the whole fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from picture_samples import picture_sample
from tiny_checks import answers_every_fixture_task, same_seed_same_weights, tiny_run, tiny_spec
from transformers import LlavaNextForConditionalGeneration

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_llava_next import HfLlavaNextAdapter
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.spec.model import ModelSpec

NAME = "tiny-llava-next"
SIZES = [(40, 30), (32, 32), (20, 50), (500, 90)]
"""Width x height: one tile (10 tokens), one tile (10), two stacked tiles (16), a wide strip (4)."""


def spec(seed: int = 0, n_tokens: int = 16) -> ModelSpec:
    return tiny_spec(NAME, "hf-llava-next", "llava-next", n_tokens, seed)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    root = tmp_path_factory.mktemp("llavanext")
    return tiny_run(root, spec(), SIZES)


@pytest.fixture(scope="module")
def adapter(paths: RunPaths) -> HfLlavaNextAdapter:
    loaded = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(loaded, HfLlavaNextAdapter)
    return loaded


def test_checkpoint_has_the_hub_layout_and_seeded_weights(paths: RunPaths, tmp_path: Path) -> None:
    folder = paths.model_dir(NAME)
    assert {"config.json", "model.safetensors", "tokenizer.json", "processor_config.json"} <= {
        p.name for p in folder.iterdir()
    }
    same_seed_same_weights(lambda seed: spec(seed=seed), folder, tmp_path, LlavaNextForConditionalGeneration)


def test_budget_must_be_the_largest_image_cost(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="n_tokens_per_image 17 must be one of 5, 16, 56"):
        build_tiny(spec(n_tokens=17), tmp_path / "bad")


def test_images_stay_in_prompt_order_although_the_template_puts_them_first(
    adapter: HfLlavaNextAdapter,
) -> None:
    assert isinstance(adapter.model, LlavaNextForConditionalGeneration)
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}]}]
    assert adapter.processor.apply_chat_template(parts, add_generation_prompt=True) == (
        "USER: <image>\na ASSISTANT:"
    ), "the checkpoint carries the llava-hf template, which moves images to the front"
    assert adapter.render(picture_sample(0, 3)) == (
        "USER: Answer.\n<image> slide 0 <image> slide 1 <image> slide 2 which is red? ASSISTANT:"
    )
    adjacent = picture_sample(1, 2).model_copy(update={"context": "<ImageHere><ImageHere>what changed?"})
    assert adapter.render(adjacent) == "USER: Answer.\n<image>\n<image>\nwhat changed? ASSISTANT:"


def test_any_res_token_counts_per_image(adapter: HfLlavaNextAdapter) -> None:
    image_token = adapter.processor.image_token_id
    counts = [
        int((adapter.encode([picture_sample(0, n)])["input_ids"] == image_token).sum()) for n in range(1, 5)
    ]
    assert [b - a for a, b in zip([0, *counts], counts, strict=False)] == [10, 10, 16, 4]
    inputs = adapter.encode([picture_sample(0, 4), picture_sample(1, 1)])
    assert inputs["image_sizes"].tolist() == [[h, w] for w, h in SIZES] + [[30, 40]]
    assert (inputs["input_ids"] == image_token).sum(dim=1).tolist() == [40, 10]
    assert inputs["attention_mask"][1, 0] == 0, "left padding expected for the shorter prompt"


def test_batch_answers_as_each_sample_alone(adapter: HfLlavaNextAdapter, paths: RunPaths) -> None:
    batch = [picture_sample(0, 3), picture_sample(1, 1), picture_sample(2, 2)]
    first = adapter.generate(batch)
    # The seeded checkpoint's greedy answers (random weights: bytes, some of them not UTF-8).
    assert first == [
        "nl\ufffdTANz\ufffd\ufffd\ufffd",
        "nl\ufffdTANz\ufffdG",
        "nl\ufffdTANz\ufffd\ufffd\ufffd",
    ]
    assert len(set(first)) > 1, "answers should depend on the input"
    assert [adapter.generate([s])[0] for s in batch] == first
    with torch.inference_mode():
        together = adapter.model(**adapter.encode(batch)).logits[:, -1]
        for i, sample in enumerate(batch):
            alone = adapter.model(**adapter.encode([sample])).logits[0, -1]
            torch.testing.assert_close(together[i], alone, atol=1e-4, rtol=1e-4)
    assert adapter.generate(batch) == first
    assert load_adapter(spec(), paths, paths.data_root).generate(batch) == first
    usage = adapter.last_usage()
    assert usage[0].input_tokens is not None and usage[0].input_tokens > 36
    assert all(u.output_tokens is not None and 1 <= u.output_tokens <= 8 for u in usage)


@pytest.mark.slow
def test_answers_every_fixture_task_through_the_engine(tmp_path: Path) -> None:
    answers_every_fixture_task(spec(), tmp_path)
