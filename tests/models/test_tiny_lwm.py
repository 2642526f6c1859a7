"""The tiny random-weight LWM through the hf-lwm adapter, run with lwm's own execution: LWM's files
(streaming params, pickled VQGAN, VideoLLaMAConfig's JSON, tokenizer.model), construct_input's ids with
one vision of 256 codes and <eov> per picture (or one vision of the frames _read_process_vision keeps of
a video of them under the video-frames variant, each closed by <eov>), the vision table where the mask is
set, and one named error for a checkpoint or budget that does not fit. Its answers on every fixture task
are held to the original code by test_lwm_parity."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from parity_golden import checkpoint_sha256
from picture_samples import picture_sample
from tiny_checks import tiny_port, tiny_run

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.adapter import AdapterError, SampleFailure
from milebench.infer.hf_lwm import LWM_7B, MAX_N_FRAMES, HfLwmAdapter, LwmTokenizer
from milebench.infer.lwm_model import EOF, EOV, LwmForCausalLM, llama_config
from milebench.infer.records import FailureKind
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.spec.model import ModelSpec
from milebench.spec.policy import ContextOverflow, RunPolicy

NAME = "tiny-lwm"
SIZES = [(40, 24), (32, 32), (20, 50)]
"""Width x height: a wide picture, a square one, a tall one."""
PER_PICTURE = 257


def spec(seed: int = 0, n_tokens: int = PER_PICTURE) -> ModelSpec:
    return tiny_port("lwm", "hf-lwm", "lwm", n_tokens, seed)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    return tiny_run(tmp_path_factory.mktemp("lwm"), spec(), SIZES)


@pytest.fixture(scope="module")
def adapter(paths: RunPaths) -> HfLwmAdapter:
    loaded = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(loaded, HfLwmAdapter)
    return loaded


def copied(paths: RunPaths, tmp_path: Path) -> RunPaths:
    other = RunPaths(out=tmp_path, reports=tmp_path)
    shutil.copytree(paths.model_dir(NAME), other.model_dir(NAME))
    return other


def test_same_seed_same_checkpoint_other_seed_other(paths: RunPaths, tmp_path: Path) -> None:
    for name, seed in (("a", 0), ("b", 1)):
        build_tiny(spec(seed), tmp_path / name)
    assert checkpoint_sha256(tmp_path / "a") == checkpoint_sha256(paths.model_dir(NAME))
    assert checkpoint_sha256(tmp_path / "a") != checkpoint_sha256(tmp_path / "b")
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["model_type"] == "video_llama" and config["sample_mode"] == "text"
    for part in ("params", "vqgan", "vqgan_config.json", "tokenizer.model"):
        assert (tmp_path / "a" / part).is_file(), part


def test_each_picture_is_one_vision_of_its_codes_and_eov(adapter: HfLwmAdapter) -> None:
    sample = picture_sample(0, 3)
    inputs = adapter.encode([sample])
    ids, mask = inputs["input_ids"][0].tolist(), inputs["vision_mask"][0].tolist()
    assert sum(mask) == 3 * PER_PICTURE
    assert [ids[i] for i, on in enumerate(mask) if on][PER_PICTURE - 1 :: PER_PICTURE] == [EOV] * 3
    assert inputs["pixel_values"].shape == (3, 256, 256, 3)
    assert float(inputs["pixel_values"].min()) >= -1 and float(inputs["pixel_values"].max()) <= 1
    assert adapter.render(sample).count("<vision>") == 3
    assert adapter.render(sample).startswith("<s>You are a helpful assistant. USER: ")
    assert adapter.render(sample).endswith("</vision> ASSISTANT:")


def video(max_context_len: int | None = None) -> ModelSpec:
    model = spec()
    assert model.execution is not None
    changes: dict[str, Any] = {"execution": model.execution.with_variant("video-frames")}
    return model.model_copy(
        update=changes | ({"max_context_len": max_context_len} if max_context_len else {})
    )


def test_the_video_frames_variant_is_one_vision_each_frame_closed_by_eov(paths: RunPaths) -> None:
    loaded = load_adapter(video(), paths, paths.data_root)
    assert isinstance(loaded, HfLwmAdapter)
    inputs = loaded.encode([picture_sample(0, 3)])
    ids, mask = inputs["input_ids"][0].tolist(), inputs["vision_mask"][0].tolist()
    vision = [ids[i] for i, on in enumerate(mask) if on]
    assert vision[PER_PICTURE - 1 :: PER_PICTURE] == [EOV, EOV, EOV] and EOF not in vision
    assert loaded.render(picture_sample(0, 3)).count("<vision>") == 1


def test_the_video_frames_variant_keeps_max_n_frames_as_the_original_picks_them(paths: RunPaths) -> None:
    loaded = load_adapter(video(), paths, paths.data_root)
    assert isinstance(loaded, HfLwmAdapter)
    three = picture_sample(0, 3)
    ten = three.model_copy(
        update={"images": (three.images * 4)[:10], "image_sha256": (three.image_sha256 * 4)[:10]}
    )
    assert loaded.kept(ten) == [0, 1, 2, 3, 5, 6, 7, 9]  # np.linspace(0, 9, 8, dtype=int)
    inputs = loaded.encode([ten])
    assert inputs["codes"].shape == (MAX_N_FRAMES, 256) and inputs["pixel_values"].shape[0] == MAX_N_FRAMES
    assert sum(inputs["vision_mask"][0].tolist()) == MAX_N_FRAMES * PER_PICTURE
    assert "<vision>0 1 2 3 5 6 7 9</vision> ASSISTANT:" in loaded.render(ten)


def test_a_video_past_the_window_fails_as_context_overflow_naming_it(paths: RunPaths) -> None:
    strict = RunPolicy(context_overflow=ContextOverflow.REFUSE)
    loaded = load_adapter(video(max_context_len=600), paths, paths.data_root, strict)
    (answer,) = loaded.generate([picture_sample(0, 3)])
    assert isinstance(answer, SampleFailure) and answer.kind is FailureKind.CONTEXT_OVERFLOW
    assert "exceeds max_context_len 600" in answer.detail


def test_vision_positions_read_the_vision_table(adapter: HfLwmAdapter) -> None:
    model = adapter.model
    assert isinstance(model, LwmForCausalLM)
    ids = torch.tensor([[5, 5]])
    embeds = model.multimodal_embeds(ids, torch.tensor([[False, True]]))
    assert torch.equal(embeds[0, 0], model.get_input_embeddings().weight[5])
    assert torch.equal(embeds[0, 1], model.vte.weight[5])


def test_the_tokenizer_splits_at_special_tokens_and_cleans_up_decoding(paths: RunPaths) -> None:
    tokenizer = LwmTokenizer(paths.model_dir(NAME) / "tokenizer.model")
    ids = tokenizer.encode("<s>You are")
    assert ids[0] == tokenizer.bos_token_id and ids[1:] == [int(i) for i in tokenizer.sp.encode("You are")]
    assert tokenizer.encode("a </s> b") == [
        *tokenizer.sp.encode("a"),
        tokenizer.eos_token_id,
        *tokenizer.sp.encode("b"),
    ]
    said = tokenizer.sp.encode("yes , no .")
    assert tokenizer.decode([tokenizer.bos_token_id, *said, tokenizer.eos_token_id]) == "yes, no."


@pytest.mark.parametrize(
    ("part", "error"),
    [
        ("params", r"lacks \['params'\]"),
        ("vqgan", r"lacks \['vqgan'\]"),
        ("tokenizer.model", r"lacks \['tokenizer.model'\]"),
    ],
)
def test_a_missing_file_names_the_folder_and_the_file(
    paths: RunPaths, tmp_path: Path, part: str, error: str
) -> None:
    other = copied(paths, tmp_path)
    (other.model_dir(NAME) / part).unlink()
    with pytest.raises(AdapterError, match=rf"'tiny-lwm': .*tiny-lwm {error}"):
        load_adapter(spec(), other, paths.data_root)


def test_a_vqgan_without_its_encoder_or_not_of_arrays_is_one_named_error(
    paths: RunPaths, tmp_path: Path
) -> None:
    other = copied(paths, tmp_path)
    path = other.model_dir(NAME) / "vqgan"
    path.write_bytes(pickle.dumps({"decoder": {}}))
    with pytest.raises(AdapterError, match=r"'tiny-lwm': .*vqgan: a pickle without the VQGAN's encoder"):
        load_adapter(spec(), other, paths.data_root)
    path.write_bytes(pickle.dumps({"encoder": Path("x")}))
    with pytest.raises(AdapterError, match=r"vqgan: the vqgan pickle holds pathlib"):
        load_adapter(spec(), other, paths.data_root)


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"num_hidden_layers": 3}, r"params: attention/wq: 2 layers stacked, the config has 3"),
        ({"sample_mode": "vision"}, r"sample_mode 'vision'; the chat path generates text"),
    ],
)
def test_a_config_that_does_not_fit_its_params_is_one_named_error(
    paths: RunPaths, tmp_path: Path, config: dict[str, Any], error: str
) -> None:
    other = copied(paths, tmp_path)
    path = other.model_dir(NAME) / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    with pytest.raises(AdapterError, match=rf"'tiny-lwm': .*{error}"):
        load_adapter(spec(), other, paths.data_root)


def test_truncated_params_are_one_named_error(paths: RunPaths, tmp_path: Path) -> None:
    other = copied(paths, tmp_path)
    path = other.model_dir(NAME) / "params"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(AdapterError, match=r"'tiny-lwm': .*params"):
        load_adapter(spec(), other, paths.data_root)


def test_a_budget_the_code_does_not_have_is_refused(paths: RunPaths) -> None:
    with pytest.raises(AdapterError, match="n_tokens_per_image 16, but each picture is 257 tokens"):
        load_adapter(spec(n_tokens=16), paths, paths.data_root)


def test_the_rotary_base_is_the_configs_theta() -> None:
    lwm = {**LWM_7B, "num_hidden_layers": 1}
    config = llama_config(lwm, 1, 2)
    theta = getattr(config, "rope_parameters", None) or {"rope_theta": config.rope_theta}
    assert theta["rope_theta"] == 50000000
    assert config.max_position_embeddings == 1048576
