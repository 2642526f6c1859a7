"""The tiny random-weight Yi-VL through the hf-yi-vl adapter, run with yi-vl's own execution: the original
checkpoint layout, the mm_default prompt, tokenizer_image_token ids, expand2square pixels, one generate
per sample, Yi's stop rule and answer clean-up, checks against the checkpoint, the whole fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from picture_samples import picture_sample
from safetensors import safe_open
from tiny_checks import answers_every_fixture_task, same_seed_same_weights, tiny_port, tiny_run
from transformers import CLIPVisionModel

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_yi_vl import HfYiVLAdapter
from milebench.infer.registry import load_adapter
from milebench.infer.yi_vl_model import YiVLForCausalLM
from milebench.spec.model import ModelSpec

NAME = "tiny-yi-vl"
SIZES = [(40, 24), (32, 32), (20, 50)]
"""Width x height: a wide picture, a square one, a tall one."""
YI_SYSTEM = (
    "This is a chat between an inquisitive human and an AI assistant. Assume the role of the AI "
    "assistant. Read all the images carefully, and respond to the human's questions with informative, "
    "helpful, detailed and polite answers. 这是一个好奇的人类和一个人工智能助手之间的对话。"
    "假设你扮演这个AI助手的角色。仔细阅读所有的图像，并对人类的问题做出信息丰富、有帮助、详细的和礼貌的回答。"  # noqa: RUF001
)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
MEAN_COLOUR = (122, 116, 104)


def spec(seed: int = 0, n_tokens: int = 16) -> ModelSpec:
    return tiny_port("yi-vl", "hf-yi-vl", "yi-vl", n_tokens, seed)


def with_execution(base: ModelSpec, **choices: Any) -> ModelSpec:
    assert base.execution is not None
    return base.model_copy(update={"execution": base.execution.model_copy(update=choices)})


def variant(name: str) -> ModelSpec:
    paper = spec()
    assert paper.execution is not None
    return paper.model_copy(update={"execution": paper.execution.with_variant(name)})


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    return tiny_run(tmp_path_factory.mktemp("yivl"), spec(), SIZES)


@pytest.fixture(scope="module")
def adapter(paths: RunPaths) -> HfYiVLAdapter:
    loaded = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(loaded, HfYiVLAdapter)
    return loaded


def generate_rows(adapter: HfYiVLAdapter, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows of every ``generate`` call the adapter's model makes from now on."""
    calls: list[int] = []
    real = adapter.model.generate

    def counted(**kwargs: Any) -> Any:
        calls.append(int(kwargs["inputs_embeds"].shape[0]))
        return real(**kwargs)

    monkeypatch.setattr(adapter.model, "generate", counted)
    return calls


def normalised(colour: tuple[int, ...]) -> torch.Tensor:
    return torch.tensor([(c / 255 - m) / s for c, m, s in zip(colour, CLIP_MEAN, CLIP_STD, strict=True)])


def test_checkpoint_has_the_original_layout_and_seeded_weights(paths: RunPaths, tmp_path: Path) -> None:
    folder = paths.model_dir(NAME)
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("llava", ["LlavaLlamaForCausalLM"])
    assert (config["mm_projector_type"], config["image_aspect_ratio"]) == ("mlp2x_gelu_Norm", "pad")
    tower = folder / config["mm_vision_tower"]
    assert {"config.json", "model.safetensors", "preprocessor_config.json"} <= {
        p.name for p in tower.iterdir()
    }
    with safe_open(tower / "model.safetensors", "pt") as weights:
        names = weights.keys()
    assert all(name.startswith("vision_model.") for name in names), "as older transformers saved"
    model = YiVLForCausalLM.from_pretrained(folder)
    projector = {k for k in model.state_dict() if "mm_projector" in k}
    assert projector == {f"model.mm_projector.{i}.{w}" for i in (0, 1, 3, 4) for w in ("weight", "bias")}
    assert isinstance(model.model.mm_projector[1], torch.nn.LayerNorm)
    same_seed_same_weights(lambda seed: spec(seed=seed), folder, tmp_path, YiVLForCausalLM)


def test_prompt_is_mm_default_with_an_image_placeholder_per_picture(adapter: HfYiVLAdapter) -> None:
    assert adapter.render(picture_sample(0, 2)) == (
        f"{YI_SYSTEM}\n\n### Human: Answer.\n<image_placeholder> slide 0 <image_placeholder> slide 1 "
        "which is red?\n### Assistant:"
    )
    adjacent = picture_sample(1, 2).model_copy(update={"context": "<ImageHere><ImageHere>what changed?"})
    assert adapter.render(adjacent).endswith(
        "### Human: Answer.\n<image_placeholder>\n<image_placeholder>\nwhat changed?\n### Assistant:"
    ), "the official worker's adjacent-image fix"


def test_ids_are_tokenizer_image_token_with_minus_200_per_picture(adapter: HfYiVLAdapter) -> None:
    sample = picture_sample(0, 2)
    chunks = adapter.render(sample).split("<image_placeholder>")
    tokenizer = adapter.processor.tokenizer
    expected = [*tokenizer(chunks[0]).input_ids, -200, *tokenizer(chunks[1]).input_ids, -200]
    expected += tokenizer(chunks[2]).input_ids
    inputs = adapter.encode([sample])
    assert inputs["input_ids"][0].tolist() == expected
    assert adapter.input_lengths(inputs) == [len(expected) + 2 * (16 - 1)], "each picture is 16 features"


def test_pictures_are_padded_square_with_the_processor_mean(paths: RunPaths, adapter: HfYiVLAdapter) -> None:
    """The 40x24 picture sits on a 40x40 square of the mean colour: the top and bottom rows of the 32x32
    pixels are that colour, the middle the picture's own."""
    pixels = adapter.encode([picture_sample(0, 1)])["pixel_values"][0]
    own = normalised((0, 200, 40))
    for row in (0, 31):
        torch.testing.assert_close(pixels[:, row, :], normalised(MEAN_COLOUR)[:, None].expand(3, 32))
    torch.testing.assert_close(pixels[:, 16, 16], own, atol=1e-2, rtol=0)
    no_pad = load_adapter(variant("process-images"), paths, paths.data_root)
    cropped = no_pad.encode([picture_sample(0, 1)])["pixel_values"][0]
    torch.testing.assert_close(cropped[:, 0, 16], own, atol=1e-2, rtol=0)


def test_each_sample_is_generated_alone(adapter: HfYiVLAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    batch = [picture_sample(0, 1), picture_sample(1, 3)]
    alone = [adapter.generate([s])[0] for s in batch]
    rows = generate_rows(adapter, monkeypatch)
    assert adapter.generate(batch) == alone
    assert rows == [1, 1], "one unpadded generate per sample"
    ids = adapter.encode([batch[1]])["input_ids"][0]
    assert adapter.last_usage()[1].input_tokens == len(ids) + 3 * 15


def test_stop_keyword_never_ends_the_first_token_and_is_cut_from_the_answer(paths: RunPaths) -> None:
    """Yi's criterion: with the first new token's own text as keyword generation still takes a second
    token; a keyword that ends the answer is cut from it."""
    sample = picture_sample(0, 2)

    def new_ids(model: ModelSpec) -> list[int]:
        adapter = load_adapter(model, paths, paths.data_root)
        assert isinstance(adapter, HfYiVLAdapter)
        (row,) = adapter.split_rows(adapter.encode([sample]))
        return adapter.new_tokens(row, adapter.stopper(row))[0].tolist()

    free = new_ids(with_execution(spec(), stop_strings=()))
    assert len(free) == 8
    decode = load_adapter(spec(), paths, paths.data_root).processor.tokenizer.decode
    first = decode(free[:1])
    assert first and first in decode(free[:2])
    assert new_ids(with_execution(spec(), stop_strings=(first,))) == free[:2]
    assert with_execution(spec()).execution == load_specs().models["yi-vl"].execution
    assert load_specs().models["yi-vl"].execution.stop_strings == ("###",)  # type: ignore[union-attr]
    adapter = load_adapter(spec(), paths, paths.data_root)
    assert adapter.clean(" The answer is B. ###\n") == "The answer is B."
    assert adapter.clean("A ### B") == "A ### B"


def test_the_spec_must_agree_with_the_checkpoint(paths: RunPaths, tmp_path: Path) -> None:
    other = RunPaths(out=tmp_path, reports=tmp_path)
    folder = other.model_dir(NAME)
    shutil.copytree(paths.model_dir(NAME), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "image_aspect_ratio": "square"}))
    with pytest.raises(
        AdapterError, match=r"pad_to_square, but the checkpoint's image_aspect_ratio is 'square'"
    ):
        load_adapter(spec(), other, paths.data_root)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(AdapterError, match="n_tokens_per_image 4 is below the 16 features"):
        load_adapter(spec(n_tokens=4), other, paths.data_root)


def test_the_vision_tower_comes_from_its_subfolder(adapter: HfYiVLAdapter, paths: RunPaths) -> None:
    tower = CLIPVisionModel.from_pretrained(paths.model_dir(NAME) / "vit/clip-vit-tiny")
    model = adapter.model
    assert isinstance(model, YiVLForCausalLM)
    for name, weights in tower.state_dict().items():
        assert torch.equal(model.vision_tower.state_dict()[name], weights), name


@pytest.mark.slow
def test_answers_every_fixture_task_through_the_engine(tmp_path: Path) -> None:
    answers_every_fixture_task(spec(), tmp_path)
