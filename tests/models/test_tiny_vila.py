"""The tiny random-weight VILA through the hf-vila adapter, run with vila's own execution: the original
checkpoint layout, the vicuna_v1 prompt, tokenizer_image_token ids, the tower its config names, VILA's
projector kinds and embedding cut, checks against the checkpoint, the whole fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from picture_samples import picture_sample
from tiny_checks import answers_every_fixture_task, same_seed_same_weights, tiny_port, tiny_run

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_vila import HfVilaAdapter
from milebench.infer.registry import load_adapter
from milebench.infer.vila_model import VilaForCausalLM
from milebench.spec.model import ModelSpec

NAME = "tiny-vila"
SIZES = [(40, 24), (32, 32), (20, 50)]
"""Width x height: a wide picture, a square one, a tall one."""
SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
    "detailed, and polite answers to the user's questions."
)


def spec(seed: int = 0, n_tokens: int = 16) -> ModelSpec:
    return tiny_port("vila", "hf-vila", "vila", n_tokens, seed)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    return tiny_run(tmp_path_factory.mktemp("vila"), spec(), SIZES)


@pytest.fixture(scope="module")
def adapter(paths: RunPaths) -> HfVilaAdapter:
    loaded = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(loaded, HfVilaAdapter)
    return loaded


def edited(paths: RunPaths, tmp_path: Path, **config: Any) -> RunPaths:
    """A copy of the tiny checkpoint with ``config`` written over its config.json (None: key removed)."""
    other = RunPaths(out=tmp_path, reports=tmp_path)
    folder = other.model_dir(NAME)
    shutil.copytree(paths.model_dir(NAME), folder)
    saved = json.loads((folder / "config.json").read_text())
    saved.update(config)
    saved = {k: v for k, v in saved.items() if v is not None}
    (folder / "config.json").write_text(json.dumps(saved))
    return other


def test_checkpoint_has_the_original_layout_and_seeded_weights(paths: RunPaths, tmp_path: Path) -> None:
    folder = paths.model_dir(NAME)
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("llava_llama", ["LlavaLlamaForCausalLM"])
    assert (config["mm_projector_type"], config["image_aspect_ratio"]) == ("mlp2x_gelu", "pad")
    assert config["tokenizer_model_max_length"] == 2048
    assert (folder / config["mm_vision_tower"] / "preprocessor_config.json").is_file()
    model = VilaForCausalLM.from_pretrained(folder)
    projector = {k for k in model.state_dict() if "mm_projector" in k}
    assert projector == {f"model.mm_projector.{i}.{w}" for i in (0, 2) for w in ("weight", "bias")}
    same_seed_same_weights(lambda seed: spec(seed=seed), folder, tmp_path, VilaForCausalLM)


def test_prompt_is_vicuna_v1_with_an_image_token_per_picture(adapter: HfVilaAdapter) -> None:
    assert adapter.render(picture_sample(0, 2)) == (
        f"{SYSTEM} USER: Answer.\n<image> slide 0 <image> slide 1 which is red? ASSISTANT:"
    )
    sample = picture_sample(0, 2)
    chunks = adapter.render(sample).split("<image>")
    tokenizer = adapter.processor.tokenizer
    expected = [*tokenizer(chunks[0]).input_ids, -200, *tokenizer(chunks[1]).input_ids, -200]
    expected += tokenizer(chunks[2]).input_ids
    inputs = adapter.encode([sample])
    assert inputs["input_ids"][0].tolist() == expected
    assert adapter.input_lengths(inputs) == [len(expected) + 2 * (16 - 1)], "each picture is 16 features"


def test_embeddings_are_cut_to_tokenizer_model_max_length(paths: RunPaths, tmp_path: Path) -> None:
    """VILA's prepare_inputs_labels_for_multimodal keeps the first tokenizer_model_max_length positions."""
    cut = load_adapter(spec(), edited(paths, tmp_path, tokenizer_model_max_length=20), paths.data_root)
    (row,) = cut.split_rows(cut.encode([picture_sample(0, 2)]))
    given = cut.generate_inputs(row)
    assert given["inputs_embeds"].shape[1] == given["input_ids"].shape[1] == 20
    assert cut.input_lengths(row)[0] > 20
    assert len(cut.new_tokens(row, cut.stopper(row))[0]) >= 1


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"mm_use_im_patch_token": None}, r"sets \['mm_use_im_patch_token'\]"),
        ({"mm_use_im_start_end": True}, r"sets \['mm_use_im_start_end'\]"),
        ({"mm_projector_type": "mlp2x_gelu_Norm"}, "VILA's code builds only linear"),
        ({"mm_projector_type": "linear"}, "lacks the projector weights"),
        ({"mm_vision_tower": "./no-tower"}, "cannot load"),
        ({"image_aspect_ratio": "square"}, "pad_to_square, but the checkpoint's image_aspect_ratio"),
    ],
)
def test_a_checkpoint_that_does_not_fit_is_one_named_error(
    paths: RunPaths, tmp_path: Path, config: dict[str, Any], error: str
) -> None:
    with pytest.raises(AdapterError, match=error) as raised:
        load_adapter(spec(), edited(paths, tmp_path, **config), paths.data_root)
    assert "'tiny-vila'" in str(raised.value)


def test_the_vision_tower_is_the_folder_its_config_names(adapter: HfVilaAdapter, paths: RunPaths) -> None:
    from transformers import CLIPVisionModel

    tower = CLIPVisionModel.from_pretrained(paths.model_dir(NAME) / "vision_tower")
    model = adapter.model
    assert isinstance(model, VilaForCausalLM)
    for name, weights in tower.state_dict().items():
        assert torch.equal(model.vision_tower.state_dict()[name], weights), name


@pytest.mark.slow
def test_answers_every_fixture_task_through_the_engine(tmp_path: Path) -> None:
    answers_every_fixture_task(spec(), tmp_path)
