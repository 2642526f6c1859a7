"""The tiny random-weight Idefics2 through the hf-idefics2 adapter: a hub-style checkpoint, interleaved chat
format, image tokens with their boundaries, image splitting, batching, the whole fixture."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from picture_samples import picture_sample
from tiny_checks import answers_every_fixture_task, same_seed_same_weights, tiny_run, tiny_spec
from transformers import AutoProcessor, Idefics2ForConditionalGeneration

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_idefics2 import HfIdefics2Adapter
from milebench.infer.registry import load_adapter
from milebench.spec.model import ModelSpec

NAME = "tiny-idefics2"
SPLIT = "tiny-idefics2-split"
SIZES = [(40, 30), (32, 32), (20, 50), (500, 90)]


def spec(seed: int = 0, n_tokens: int = 4, name: str = NAME) -> ModelSpec:
    return tiny_spec(name, "hf-idefics2", "idefics2", n_tokens, seed)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    root = tmp_path_factory.mktemp("idefics2")
    return tiny_run(root, spec(), SIZES)


@pytest.fixture(scope="module")
def adapter(paths: RunPaths) -> HfIdefics2Adapter:
    loaded = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(loaded, HfIdefics2Adapter)
    return loaded


def test_checkpoint_has_the_hub_layout_and_seeded_weights(paths: RunPaths, tmp_path: Path) -> None:
    folder = paths.model_dir(NAME)
    assert {"config.json", "model.safetensors", "tokenizer.json", "processor_config.json"} <= {
        p.name for p in folder.iterdir()
    }
    same_seed_same_weights(lambda seed: spec(seed=seed), folder, tmp_path, Idefics2ForConditionalGeneration)


def test_prompt_follows_the_idefics2_chat_format(adapter: HfIdefics2Adapter) -> None:
    assert isinstance(adapter.model, Idefics2ForConditionalGeneration)
    assert adapter.render(picture_sample(0, 3)) == (
        "User: Answer.\n<image> slide 0 <image> slide 1 <image> slide 2 which is red?<end_of_utterance>\n"
        "Assistant:"
    )


def test_each_image_gets_its_latents_between_boundary_tokens(adapter: HfIdefics2Adapter) -> None:
    inputs = adapter.encode([picture_sample(0, 4), picture_sample(1, 1)])
    tokenizer = adapter.processor.tokenizer
    assert (inputs["input_ids"] == adapter.processor.image_token_id).sum(dim=1).tolist() == [16, 4]
    one = tokenizer.decode(inputs["input_ids"][1][inputs["attention_mask"][1].bool()])
    boundary = "<fake_token_around_image>"
    image = f"{boundary}{'<image>' * 4}{boundary}"
    assert one == f"User: Answer.\n{image} slide 0 which is red?<end_of_utterance>\nAssistant:"
    assert tuple(inputs["pixel_values"].shape) == (2, 4, 3, 32, 32), "images padded to the batch's most"
    assert inputs["pixel_values"][1, 1:].abs().sum() == 0, "missing images are empty"
    assert inputs["attention_mask"][1, 0] == 0, "left padding expected for the shorter prompt"


def test_image_splitting_costs_five_times_and_needs_the_budget(paths: RunPaths) -> None:
    folder = paths.model_dir(SPLIT)
    shutil.copytree(paths.model_dir(NAME), folder)
    processor = AutoProcessor.from_pretrained(folder)
    processor.image_processor.do_image_splitting = True
    processor.save_pretrained(folder)
    with pytest.raises(AdapterError, match="n_tokens_per_image 4 is below the 20 image tokens"):
        load_adapter(spec(name=SPLIT), paths, paths.data_root)
    split = load_adapter(spec(n_tokens=20, name=SPLIT), paths, paths.data_root)
    inputs = split.encode([picture_sample(0, 2)])
    assert int((inputs["input_ids"] == split.processor.image_token_id).sum()) == 40
    assert tuple(inputs["pixel_values"].shape[:2]) == (1, 10), "four crops and the whole image, each"
    assert split.generate([picture_sample(0, 2)]) == ["\ufffd\ufffd\ufffd~\ufffdL\ufffd\ufffd"]


def test_batch_answers_as_each_sample_alone(adapter: HfIdefics2Adapter, paths: RunPaths) -> None:
    batch = [picture_sample(0, 3), picture_sample(1, 1), picture_sample(2, 2)]
    first = adapter.generate(batch)
    # The seeded checkpoint's greedy answers (random weights: bytes, many of them not UTF-8).
    assert first == [
        '\ufffd"\t\ufffdu\ufffdu\ufffd',
        '\ufffd"\ufffd5lide\ufffdu~',
        "\ufffd\ufffditlide\ufffdu~\ufffd",
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
    assert usage[0].input_tokens is not None and usage[0].input_tokens > 12
    assert all(u.output_tokens is not None and 1 <= u.output_tokens <= 8 for u in usage)


@pytest.mark.slow
def test_answers_every_fixture_task_through_the_engine(tmp_path: Path) -> None:
    answers_every_fixture_task(spec(), tmp_path)
