"""The tiny random-weight Mantis through the hf-mantis adapter, run with mantis's own execution: a llava-hf
layout LLaVA over a Mistral, chat_mllava's turn with MLlavaProcessor's image denotation, whole-text ids
with its truncation rule, unpadded pictures, one generate per sample (batched as a variant), the whole
fixture."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from picture_samples import picture_sample
from tiny_checks import answers_every_fixture_task, same_seed_same_weights, tiny_port, tiny_run
from transformers import LlavaForConditionalGeneration

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.hf_mantis import HfMantisAdapter
from milebench.infer.registry import load_adapter
from milebench.spec.model import ModelSpec

NAME = "tiny-mantis"
SIZES = [(40, 24), (32, 32), (20, 50)]
"""Width x height: a wide picture, a square one, a tall one."""
MANTIS_SYSTEM = (
    "A chat between a curious human and an artificial intelligence assistant. The assistant gives "
    "helpful, detailed, and polite answers to the human's questions."
)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def spec(seed: int = 0, variant: str = "paper") -> ModelSpec:
    model = tiny_port("mantis", "hf-mantis", "mantis", seed=seed)
    assert model.execution is not None
    return model.model_copy(update={"execution": model.execution.with_variant(variant)})


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    return tiny_run(tmp_path_factory.mktemp("mantis"), spec(), SIZES)


@pytest.fixture(scope="module")
def adapter(paths: RunPaths) -> HfMantisAdapter:
    loaded = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(loaded, HfMantisAdapter)
    return loaded


def generate_rows(adapter: HfMantisAdapter, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows of every ``generate`` call the adapter's model makes from now on."""
    calls: list[int] = []
    real = adapter.model.generate

    def counted(**kwargs: Any) -> Any:
        calls.append(int(kwargs["input_ids"].shape[0]))
        return real(**kwargs)

    monkeypatch.setattr(adapter.model, "generate", counted)
    return calls


def test_checkpoint_is_a_llava_over_a_mistral_without_chat_template(paths: RunPaths, tmp_path: Path) -> None:
    folder = paths.model_dir(NAME)
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["text_config"]["model_type"]) == ("llava", "mistral")
    assert "chat_template" not in (folder / "processor_config.json").read_text()
    assert not (folder / "chat_template.jinja").exists()
    same_seed_same_weights(lambda seed: spec(seed=seed), folder, tmp_path, LlavaForConditionalGeneration)


def test_prompt_is_mllava_v1_with_each_image_denoted(adapter: HfMantisAdapter) -> None:
    assert adapter.render(picture_sample(0, 2)) == (
        f"{MANTIS_SYSTEM}</s>USER: Answer.\n(image 1: <Image><image></Image>) slide 0 "
        "(image 2: <Image><image></Image>) slide 1 which is red?</s>ASSISTANT:"
    )
    adjacent = picture_sample(1, 2).model_copy(update={"context": "<ImageHere><ImageHere>what changed?"})
    assert adapter.render(adjacent).endswith(
        "USER: Answer.\n(image 1: <Image><image></Image>)\n(image 2: <Image><image></Image>)\nwhat changed?"
        "</s>ASSISTANT:"
    ), "the official worker's adjacent-image fix"


def test_ids_are_the_whole_text_tokenized_with_each_image_token_expanded(adapter: HfMantisAdapter) -> None:
    sample = picture_sample(0, 2)
    image_id = adapter.processor.tokenizer.convert_tokens_to_ids("<image>")
    whole = adapter.processor.tokenizer(adapter.render(sample)).input_ids
    expected = [n for i in whole for n in ([i] * 16 if i == image_id else [i])]
    inputs = adapter.encode([sample])
    assert inputs["input_ids"][0].tolist() == expected
    assert whole.count(image_id) == 2
    assert whole.count(adapter.processor.tokenizer.eos_token_id) == 2, "the turn's two '</s>' are EOS tokens"


def test_pictures_get_the_image_processor_alone(adapter: HfMantisAdapter) -> None:
    """The wide 40x24 picture is resized and centre-cropped, not padded: its top row is its own colour."""
    pixels = adapter.encode([picture_sample(0, 1)])["pixel_values"][0]
    own = torch.tensor([(c / 255 - m) / s for c, m, s in zip((0, 200, 40), CLIP_MEAN, CLIP_STD, strict=True)])
    torch.testing.assert_close(pixels[:, 0, 16], own, atol=1e-2, rtol=0)


def test_tokens_past_model_max_length_are_cut_with_their_pictures(
    paths: RunPaths, caplog: pytest.LogCaptureFixture
) -> None:
    """MLlavaProcessor tokenizes with truncation at the tokenizer's model_max_length: the end is cut, and
    pictures whose image tokens went with it are dropped."""
    adapter = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(adapter, HfMantisAdapter)
    sample = picture_sample(0, 3)
    tokenizer = adapter.processor.tokenizer
    whole = tokenizer(adapter.render(sample)).input_ids
    image_id = adapter.processor.tokenizer.convert_tokens_to_ids("<image>")
    second = [i for i, n in enumerate(whole) if n == image_id][1]
    tokenizer.model_max_length = second + 1
    with caplog.at_level(logging.WARNING):
        inputs = adapter.encode([sample])
    assert inputs["pixel_values"].shape[0] == 2
    assert inputs["input_ids"][0].tolist() == [
        n for i in whole[: second + 1] for n in ([i] * 16 if i == image_id else [i])
    ]
    assert "cut 1 of 3 image tokens" in caplog.text and "sample 0" in caplog.text
    assert adapter.input_view(sample).notes == (
        f"MLlavaProcessor cuts the ids after {second + 1} (model_max_length), and the pictures cut with them",
    )


def test_each_sample_is_generated_alone_and_batched_is_a_variant(
    adapter: HfMantisAdapter, paths: RunPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = [picture_sample(0, 1), picture_sample(1, 3)]
    alone = [adapter.generate([s])[0] for s in batch]
    assert all(isinstance(a, str) and a for a in alone)
    rows = generate_rows(adapter, monkeypatch)
    assert adapter.generate(batch) == alone
    assert rows == [1, 1], "one unpadded generate per sample"
    batched = load_adapter(spec(variant="batched"), paths, paths.data_root)
    assert isinstance(batched, HfMantisAdapter)
    together = generate_rows(batched, monkeypatch)
    assert len(batched.generate(batch)) == 2 and together == [2]


@pytest.mark.slow
def test_answers_every_fixture_task_through_the_engine(tmp_path: Path) -> None:
    answers_every_fixture_task(spec(), tmp_path)
