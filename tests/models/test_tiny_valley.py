"""The tiny random-weight Valley through the hf-valley adapter, run with valley's own execution: the
original checkpoint layout, build_inputs' prompt with one <vi_frame> per picture, the frames' pooled
patches and CLS features in the embeddings, the tower weights of the checkpoint, and one named error for a
checkpoint, budget, stop rule or module that does not fit. Its answers on every fixture task are held to
the original code by test_valley_parity."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from parity_golden import checkpoint_sha256
from picture_samples import picture_sample
from tiny_checks import tiny_port, tiny_run

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_valley import HfValleyAdapter, process_response
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.infer.tiny_llama_vid import INDEX, SHARD
from milebench.infer.valley_model import IM_START, IMAGE_PATCH, PATCHES, VIDEO_FRAME, ValleyForCausalLM
from milebench.spec.model import ModelSpec

NAME = "tiny-valley"
SIZES = [(40, 24), (32, 32), (20, 50)]
"""Width x height: a wide picture, a square one, a tall one."""


def spec(seed: int = 0, n_tokens: int = 1) -> ModelSpec:
    return tiny_port("valley", "hf-valley", "valley", n_tokens, seed)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    return tiny_run(tmp_path_factory.mktemp("valley"), spec(), SIZES)


@pytest.fixture(scope="module")
def adapter(paths: RunPaths) -> HfValleyAdapter:
    loaded = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(loaded, HfValleyAdapter)
    return loaded


def edited(paths: RunPaths, tmp_path: Path, part: str = "config.json", **config: Any) -> RunPaths:
    """A copy of the tiny checkpoint with ``config`` written over one of its JSON files."""
    other = RunPaths(out=tmp_path, reports=tmp_path)
    folder = other.model_dir(NAME)
    shutil.copytree(paths.model_dir(NAME), folder)
    saved = json.loads((folder / part).read_text())
    (folder / part).write_text(json.dumps({**saved, **config}))
    return other


def test_same_seed_same_checkpoint_other_seed_other(paths: RunPaths, tmp_path: Path) -> None:
    for name, seed in (("a", 0), ("b", 1)):
        build_tiny(spec(seed), tmp_path / name)
    assert checkpoint_sha256(tmp_path / "a") == checkpoint_sha256(paths.model_dir(NAME))
    assert checkpoint_sha256(tmp_path / "a") != checkpoint_sha256(tmp_path / "b")
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["model_type"] == "valley" and config["mm_vision_tower"] == "./vision_tower"
    for part in (SHARD, INDEX, "vision_tower/pytorch_model.bin", "vision_tower/preprocessor_config.json"):
        assert (tmp_path / "a" / part).is_file(), part
    names = json.loads((tmp_path / "a" / INDEX).read_text())["weight_map"]
    assert any(name.startswith("model.vision_tower.vision_model.") for name in names)


def test_prompt_writes_the_video_once_with_a_frame_token_per_picture(adapter: HfValleyAdapter) -> None:
    sample = picture_sample(0, 3)
    text = adapter.render(sample)
    assert text.startswith("You are Valley, a large language and vision assistant trained by ByteDance.")
    assert "\n\n### Assistent: Hi there! How can I help you today? \n### Human: <im_start>" in text
    assert text.count(IMAGE_PATCH) == PATCHES and text.count(VIDEO_FRAME) == 3
    assert text.endswith("<vi_end> Answer.\n slide 0  slide 1  slide 2 which is red? \n###")
    inputs = adapter.encode([sample])
    assert inputs["pixel_values"].shape == (3, 3, 64, 64)
    assert adapter.input_lengths(inputs) == [len(adapter.token_ids(text))]


def test_frames_are_pooled_over_the_patch_tokens_and_each_cls_at_its_frame_token(
    adapter: HfValleyAdapter,
) -> None:
    model = adapter.model
    assert isinstance(model, ValleyForCausalLM)
    (row,) = adapter.split_rows(adapter.encode([picture_sample(0, 3)]))
    ids, pixels = row["input_ids"][0], row["pixel_values"]
    with torch.no_grad():
        embeds = model.multimodal_embeds(ids, pixels)
        features = model.frame_features(pixels)
    start = int((ids == model.tokens.im_start).nonzero()[0])
    assert torch.equal(embeds[start + 1 : start + 1 + PATCHES], features[:, 1:].mean(dim=0))
    frames = (ids == model.tokens.vi_frame).nonzero().flatten()
    assert torch.equal(embeds[frames], features[:, 0])
    text = (ids != model.tokens.im_patch) & (ids != model.tokens.vi_frame)
    assert torch.equal(embeds[text], model.get_input_embeddings()(ids)[text])
    assert IM_START in adapter.render(picture_sample(0, 1))


def test_the_tower_weights_are_the_checkpoints(adapter: HfValleyAdapter, paths: RunPaths) -> None:
    saved = torch.load(paths.model_dir(NAME) / "vision_tower" / "pytorch_model.bin", weights_only=True)
    model = adapter.model
    assert isinstance(model, ValleyForCausalLM)
    for name, weights in model.vision_tower.state_dict().items():
        assert torch.equal(saved[f"vision_model.{name}"], weights), name


def test_answers_are_cleaned_as_process_response_cleans_them() -> None:
    assert process_response("  ### Valley: Assistant: a cat ### Human: no") == "a cat"
    assert process_response("Response: two\n") == "two"


@pytest.mark.parametrize(
    ("part", "config", "error"),
    [
        ("config.json", {"mm_hidden_size": 32}, "mm_hidden_size 32, forward projects 1024 features"),
        ("config.json", {"use_delta_transformer": True}, r"\['use_delta_transformer'\] set: the kit ports"),
        ("config.json", {"mm_vision_tower": "./no-tower"}, r"no vision tower at .*no-tower/config\.json"),
        (
            "vision_tower/config.json",
            {"image_size": 32},
            "its tower gives 64 patches, build_inputs writes 256",
        ),
    ],
)
def test_a_checkpoint_that_does_not_fit_is_one_named_error(
    paths: RunPaths, tmp_path: Path, part: str, config: dict[str, Any], error: str
) -> None:
    with pytest.raises(AdapterError, match=error) as raised:
        load_adapter(spec(), edited(paths, tmp_path, part, **config), paths.data_root)
    assert "'tiny-valley'" in str(raised.value)


def test_missing_tower_weights_name_the_checkpoint(paths: RunPaths, tmp_path: Path) -> None:
    other = edited(paths, tmp_path)
    shard = other.model_dir(NAME) / SHARD
    state = torch.load(shard, weights_only=True)
    torch.save({k: v for k, v in state.items() if ".vision_tower." not in k}, shard)
    with pytest.raises(
        AdapterError, match=r"'tiny-valley': .*tiny-valley lacks the projector or tower weights"
    ):
        load_adapter(spec(), other, paths.data_root)


def test_a_missing_checkpoint_names_the_command_that_builds_it(tmp_path: Path) -> None:
    empty = RunPaths(out=tmp_path, reports=tmp_path)
    with pytest.raises(AdapterError, match=r"no checkpoint in .*milebench tiny-model --model tiny-valley"):
        load_adapter(spec(), empty, tmp_path)


@pytest.mark.parametrize(
    ("update", "error"),
    [
        ({"n_tokens_per_image": 2}, "n_tokens_per_image 2, but each frame adds one <vi_frame> token"),
        ({"stop": ("###", "T")}, r"stop_strings \['###', 'T'\]: Valley's completion stops on one keyword"),
    ],
)
def test_a_budget_or_stop_rule_the_code_does_not_have_is_refused(
    paths: RunPaths, update: dict[str, Any], error: str
) -> None:
    model = spec()
    assert model.execution is not None
    stops = update.pop("stop", model.execution.stop_strings)
    wrong = model.model_copy(
        update={**update, "execution": model.execution.model_copy(update={"stop_strings": stops})}
    )
    with pytest.raises(AdapterError, match=error):
        load_adapter(wrong, paths, paths.data_root)


def test_an_import_failure_names_the_module_and_the_image(
    paths: RunPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "milebench.infer.hf_valley")
    monkeypatch.setitem(sys.modules, "milebench.infer.valley_model", None)
    with_image = spec().model_copy(update={"container": "valley"})
    with pytest.raises(
        AdapterError, match=r"'tiny-valley': adapter 'hf-valley' cannot be imported"
    ) as raised:
        load_adapter(with_image, paths, paths.data_root)
    assert "milebench/infer/hf_valley.py" in str(raised.value)
    assert "milebench image build --family valley" in str(raised.value)
