"""The tiny Video-LLaMA-2: seeded, in the original's layout, loaded as the real parts are, and answering
every fixture task; a checkpoint that does not fit the spec or the architecture, or lacks a part, is one
error naming the model spec and the file; the video-frames variant, not implemented, is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_checks import answers_every_fixture_task, same_seed_same_checkpoint, tiny_port

from milebench.infer import hf_cheetor
from milebench.infer.adapter import AdapterError
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.infer.tiny_cheetor import BLIP2_FILE
from milebench.infer.tiny_minigpt_v2 import EVA_FILE, TOKENIZER_MODEL
from milebench.infer.tiny_video_llama_2 import CHECKPOINT_FILE
from milebench.paths import RunPaths
from milebench.spec.model import ModelSpec

NAME = "tiny-video-llama-2"


def spec(seed: int = 0, n_tokens: int = 16) -> ModelSpec:
    return tiny_port("video-llama-2", "hf-video-llama-2", "video-llama-2", n_tokens, seed)


def built(tmp_path: Path) -> RunPaths:
    paths = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    build_tiny(spec(), paths.model_dir(NAME))
    return paths


def test_same_seed_same_checkpoint_other_seed_other(tmp_path: Path) -> None:
    folder = same_seed_same_checkpoint(spec, tmp_path)
    assert {TOKENIZER_MODEL, EVA_FILE, BLIP2_FILE, CHECKPOINT_FILE} <= {p.name for p in folder.iterdir()}


@pytest.mark.slow
def test_answers_every_fixture_task(tmp_path: Path) -> None:
    answers_every_fixture_task(spec(), tmp_path)


def test_a_budget_the_video_q_former_does_not_give_is_refused(tmp_path: Path) -> None:
    paths = built(tmp_path)
    wrong = spec().model_copy(update={"n_tokens_per_image": 32})
    with pytest.raises(
        AdapterError, match=rf"'{NAME}': n_tokens_per_image 32.*gives 16 .*16 video Q-Former queries"
    ):
        load_adapter(wrong, paths, paths.data_root)


@pytest.mark.parametrize("part", [CHECKPOINT_FILE, BLIP2_FILE, EVA_FILE])
def test_a_missing_part_names_the_file(tmp_path: Path, part: str) -> None:
    paths = built(tmp_path)
    (paths.model_dir(NAME) / part).unlink()
    with pytest.raises(AdapterError, match=part.replace(".", r"\.")):
        load_adapter(spec(), paths, paths.data_root)


@pytest.mark.parametrize("key", ["llama_proj.weight", "video_frame_position_embedding.weight"])
def test_a_checkpoint_without_a_needed_part_names_the_file_and_the_part(tmp_path: Path, key: str) -> None:
    paths = built(tmp_path)
    path = paths.model_dir(NAME) / CHECKPOINT_FILE
    state = torch.load(path, weights_only=True)["model"]
    torch.save({"model": {k: v for k, v in state.items() if k != key}}, path)
    with pytest.raises(AdapterError, match=rf"'{NAME}': .*{CHECKPOINT_FILE}.* holds no .*{key}"):
        load_adapter(spec(), paths, paths.data_root)


def test_a_checkpoint_that_does_not_fit_the_architecture_names_the_file(tmp_path: Path) -> None:
    paths = built(tmp_path)
    path = paths.model_dir(NAME) / CHECKPOINT_FILE
    state = torch.load(path, weights_only=True)["model"]
    state["video_query_tokens"] = torch.zeros(1, 3, 5)
    torch.save({"model": state}, path)
    with pytest.raises(AdapterError, match=rf"'{NAME}': .*{CHECKPOINT_FILE} does not fit the model"):
        load_adapter(spec(), paths, paths.data_root)


def test_the_video_frames_variant_is_refused_by_name(tmp_path: Path) -> None:
    paths = built(tmp_path)
    execution = spec().execution
    assert execution is not None
    frames = spec().model_copy(
        update={"execution": execution.model_copy(update={"image_sequence": "video_frames"})}
    )
    with pytest.raises(AdapterError, match=r"image_sequence.*video_frames"):
        load_adapter(frames, paths, paths.data_root)


def test_a_tokenizer_whose_libraries_are_missing_names_the_spec_the_folder_and_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = built(tmp_path)

    def without_sentencepiece(*args: object, **kwargs: object) -> None:
        raise ImportError("LlamaTokenizer requires the SentencePiece library but it was not found")

    monkeypatch.setattr(hf_cheetor.AutoTokenizer, "from_pretrained", without_sentencepiece)
    with pytest.raises(AdapterError) as caught:
        load_adapter(spec(), paths, paths.data_root)
    message = str(caught.value)
    assert f"'{NAME}'" in message and str(paths.model_dir(NAME)) in message
    assert "SentencePiece" in message and "pip install -e '.[minigpt-v2]'" in message
