"""The tiny Video-LLaMA-2: seeded, in the original's layout, loaded as the real parts are, and answering
every fixture task; a checkpoint that does not fit the spec or the architecture, or lacks a part, is one
error naming the model spec and the file; the video-frames variant reads all pictures as one video and
names the frame limit past its frame positions."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_checks import answers_every_fixture_task, same_seed_same_checkpoint, tiny_port

from milebench.benchmarks.milebench.fixture.prepared import prepared_fixture
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.infer import hf_cheetor
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_minigpt_v2 import IMAGE_ID
from milebench.infer.hf_video_llama_2 import VIDEO_LLAMA_VIDEO, HfVideoLlama2Adapter
from milebench.infer.records import FailureKind
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.infer.tiny_cheetor import BLIP2_FILE
from milebench.infer.tiny_minigpt_v2 import EVA_FILE, TOKENIZER_MODEL
from milebench.infer.tiny_video_llama_2 import CHECKPOINT_FILE, tiny_video_llama_shape
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


def frames_spec() -> ModelSpec:
    """The tiny port under the video-frames variant: all of a sample's pictures as one video."""
    execution = spec().execution
    assert execution is not None
    return spec().model_copy(update={"execution": execution.with_variant("video-frames")})


@pytest.mark.slow
def test_the_video_frames_variant_answers_within_the_frame_positions_and_names_the_limit_past_them(
    tmp_path: Path,
) -> None:
    """A sample with at most max_frame_pos pictures is answered, one with more fails as context overflow
    naming the sample and the limit (the mini-MileBench has both)."""
    limit = tiny_video_llama_shape(16).max_frame_pos
    predictions = answers_every_fixture_task(frames_spec(), tmp_path, lambda s: len(s.images) > limit)
    failed = [p for p in predictions if p.failure is not None]
    assert failed and len(failed) < len(predictions)
    for prediction in failed:
        detail = prediction.failure_detail or ""
        assert prediction.failure is FailureKind.CONTEXT_OVERFLOW
        assert f"'{NAME}': task {prediction.task}, sample {prediction.sample_id}: " in detail
        assert f"the frame position embedding has {limit} (max_frame_pos)" in detail


def test_the_video_frames_variant_counts_one_video_against_the_window(tmp_path: Path) -> None:
    """One video placeholder and one image id for all pictures, a pixel row per picture, and the video's
    query outputs (the spec's tokens per image) counted once in the input's length."""
    paths = built(tmp_path)
    (samples,) = prepared_fixture(paths, [load_specs().tasks["ALFRED"]], 1).values()
    sample = samples[0]
    assert len(sample.images) > 1
    adapter = load_adapter(frames_spec(), paths, paths.data_root)
    assert isinstance(adapter, HfVideoLlama2Adapter)
    inputs = adapter.encode([sample])
    ids = inputs["input_ids"][0].tolist()
    assert adapter.render(sample).count(VIDEO_LLAMA_VIDEO) == 1 and ids.count(IMAGE_ID) == 1
    assert inputs["pixel_values"].shape[0] == len(sample.images)
    assert adapter.input_lengths(inputs) == [len(ids) - 1 + (spec().n_tokens_per_image or 0)]


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
