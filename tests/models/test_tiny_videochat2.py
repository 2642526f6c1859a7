"""The tiny VideoChat2: seeded, in the original's layout, loaded as the real parts are, and answering every
fixture task; the conversation, the stop ids and the answer's cut are the original's; a checkpoint that does
not fit the spec or the architecture, lacks a part or half a LoRA pair, or a BERT vocabulary without the
instruction's words, is one error naming the model spec and the file; the video-frames variant reads all
pictures as one video (load_video's transform, the video's instruction) and counts it once against the
window."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
import pytest
import torch
from PIL import Image
from tiny_checks import answers_every_fixture_task, same_seed_same_checkpoint, tiny_port

from milebench.benchmarks.milebench.fixture.prepared import prepared_fixture
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_minigpt_v2 import IMAGE_ID
from milebench.infer.hf_videochat2 import (
    IMAGE_INSTRUCTION,
    VIDEO_INSTRUCTION,
    VIDEOCHAT2_VIDEO,
    HfVideoChat2Adapter,
    StopIds,
    VideoFrames,
    videochat2,
    videochat2_video,
)
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.infer.tiny_minigpt_v2 import TOKENIZER_MODEL
from milebench.infer.tiny_videochat2 import BERT_VOCAB_FILE, CHECKPOINT_FILE, UMT_FILE
from milebench.infer.videochat2_model import along_time, sinusoid_table
from milebench.spec.model import ModelSpec

NAME = "tiny-videochat2"
LORA = "llama_model.base_model.model.model.layers.1.self_attn.v_proj.lora_B.default.weight"


def spec(seed: int = 0, n_tokens: int = 12) -> ModelSpec:
    return tiny_port("videochat2", "hf-videochat2", "videochat2", n_tokens, seed)


def built(tmp_path: Path) -> RunPaths:
    paths = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    build_tiny(spec(), paths.model_dir(NAME))
    return paths


def rewritten(paths: RunPaths, name: str, change: dict[str, torch.Tensor | None]) -> None:
    """The part file ``name`` with keys replaced (a tensor) or dropped (None)."""
    path = paths.model_dir(NAME) / name
    saved = torch.load(path, weights_only=True)
    state = saved.get("model", saved)
    for key, value in change.items():
        state.pop(key) if value is None else state.__setitem__(key, value)
    torch.save({"model": state} if "model" in saved else state, path)


def test_same_seed_same_checkpoint_other_seed_other(tmp_path: Path) -> None:
    folder = same_seed_same_checkpoint(spec, tmp_path)
    assert {TOKENIZER_MODEL, UMT_FILE, CHECKPOINT_FILE, BERT_VOCAB_FILE} <= {p.name for p in folder.iterdir()}


def test_answers_every_fixture_task(tmp_path: Path) -> None:
    answers_every_fixture_task(spec(), tmp_path)


def test_the_conversation_gives_each_piece_and_picture_a_message() -> None:
    assert videochat2("Look.<ImageHere> <ImageHere>Which?") == (
        "###Human: Look.\n###Human: <Image><ImageHere></Image>\n###Human: <Image><ImageHere></Image>\n"
        "###Human: Which?\n###Assistant:"
    )


@pytest.mark.parametrize(
    ("new", "done"),
    [([5, 835], True), ([2277, 29937], True), ([2277], False), ([835, 5], False), ([29937, 2277], False)],
)
def test_generation_stops_where_the_ids_end_with_a_stop_word(new: list[int], done: bool) -> None:
    ids = torch.tensor([[1, 2, 3, *new]])
    assert (
        StopIds(3)(cast("torch.LongTensor", ids), cast("torch.FloatTensor", torch.zeros(1, 1))).item() is done
    )


def test_the_answer_is_cut_at_the_stop_word_after_the_last_role(tmp_path: Path) -> None:
    paths = built(tmp_path)
    adapter = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(adapter, HfVideoChat2Adapter)
    assert adapter.clean(" Assistant: B. ### Human: more") == "B."


def test_a_budget_the_q_former_does_not_give_is_refused(tmp_path: Path) -> None:
    paths = built(tmp_path)
    wrong = spec().model_copy(update={"n_tokens_per_image": 96})
    with pytest.raises(AdapterError, match=rf"'{NAME}': n_tokens_per_image 96.*gives 12 .*4 \+ 8 extra"):
        load_adapter(wrong, paths, paths.data_root)


@pytest.mark.parametrize("part", [CHECKPOINT_FILE, UMT_FILE, BERT_VOCAB_FILE])
def test_a_missing_part_names_the_file(tmp_path: Path, part: str) -> None:
    paths = built(tmp_path)
    (paths.model_dir(NAME) / part).unlink()
    with pytest.raises(AdapterError, match=part.replace(".", r"\.")):
        load_adapter(spec(), paths, paths.data_root)


@pytest.mark.parametrize(
    ("part", "key"), [(CHECKPOINT_FILE, "extra_query_tokens"), (UMT_FILE, "vision_layernorm.weight")]
)
def test_a_file_without_a_needed_part_names_the_file_and_the_part(
    tmp_path: Path, part: str, key: str
) -> None:
    paths = built(tmp_path)
    rewritten(paths, part, {key: None})
    with pytest.raises(AdapterError, match=rf"'{NAME}': .*{part}.* holds no .*{key}"):
        load_adapter(spec(), paths, paths.data_root)


def test_half_a_lora_pair_names_the_file_and_the_projection(tmp_path: Path) -> None:
    paths = built(tmp_path)
    rewritten(paths, CHECKPOINT_FILE, {LORA: None})
    with pytest.raises(
        AdapterError, match=rf"{CHECKPOINT_FILE}: the LoRA pair of model\.layers\.1\..*v_proj"
    ):
        load_adapter(spec(), paths, paths.data_root)


def test_a_checkpoint_that_does_not_fit_the_architecture_names_the_file(tmp_path: Path) -> None:
    paths = built(tmp_path)
    rewritten(paths, CHECKPOINT_FILE, {"extra_query_tokens": torch.zeros(1, 3, 5)})
    with pytest.raises(AdapterError, match=rf"'{NAME}': .*{CHECKPOINT_FILE} does not fit the model"):
        load_adapter(spec(), paths, paths.data_root)


def test_a_vocabulary_without_the_instruction_s_words_names_the_file(tmp_path: Path) -> None:
    paths = built(tmp_path)
    vocab = paths.model_dir(NAME) / BERT_VOCAB_FILE
    vocab.write_text(vocab.read_text().replace("observe\n", ""))
    with pytest.raises(AdapterError, match=rf"'{NAME}': .*{BERT_VOCAB_FILE} lacks words of 'Observe"):
        load_adapter(spec(), paths, paths.data_root)


def frames_spec() -> ModelSpec:
    """The tiny port under the video-frames variant: all of a sample's pictures as one video."""
    execution = spec().execution
    assert execution is not None
    return spec().model_copy(update={"execution": execution.with_variant("video-frames")})


@pytest.mark.slow
def test_the_video_frames_variant_answers_every_fixture_task(tmp_path: Path) -> None:
    """No frame limit: every sample, up to the mini-MileBench's 40 pictures, is answered."""
    answers_every_fixture_task(frames_spec(), tmp_path)


def test_the_video_is_the_first_message_and_the_question_without_placeholders_the_next() -> None:
    assert videochat2_video("Look.<ImageHere> <ImageHere>Which?") == (
        "###Human: <Video><VideoHere></Video>\n###Human: Look. Which?\n###Assistant:"
    )
    assert videochat2_video("No pictures.") == "###Human: No pictures.\n###Assistant:"


def test_the_video_frames_variant_counts_one_video_against_the_window(tmp_path: Path) -> None:
    """One video message and one image id for all pictures, a pixel row per picture, the video's query
    outputs (the spec's tokens per image) counted once in the input's length, the video's instruction."""
    paths = built(tmp_path)
    (samples,) = prepared_fixture(paths, [load_specs().tasks["ALFRED"]], 1).values()
    sample = samples[0]
    assert len(sample.images) > 1
    adapter = load_adapter(frames_spec(), paths, paths.data_root)
    assert isinstance(adapter, HfVideoChat2Adapter)
    inputs = adapter.encode([sample])
    ids = inputs["input_ids"][0].tolist()
    assert adapter.render(sample).count(VIDEOCHAT2_VIDEO) == 1 and ids.count(IMAGE_ID) == 1
    assert inputs["pixel_values"].shape == (len(sample.images), 3, 224, 224)
    assert adapter.input_lengths(inputs) == [len(ids) - 1 + (spec().n_tokens_per_image or 0)]
    video, image = (adapter.instruction_ids(text).tolist() for text in (VIDEO_INSTRUCTION, IMAGE_INSTRUCTION))
    assert adapter.instruction.tolist() == video != image


def test_a_video_frame_is_scaled_on_its_shorter_side_and_centre_cropped() -> None:
    """``load_video``'s transform: a 448 x 224 picture keeps its middle half, not a squeezed whole."""
    picture = np.zeros((224, 448, 3), dtype=np.uint8)
    picture[:, 112:336] = 255
    (frame,) = VideoFrames(224)([Image.fromarray(picture)])["pixel_values"]
    white = torch.tensor(
        [(1 - m) / s for m, s in zip(VideoFrames.image_mean, VideoFrames.image_std, strict=True)]
    )
    assert torch.allclose(frame.mean(dim=(1, 2)), white)


def test_the_video_position_table_is_the_four_frame_table_resized_along_time() -> None:
    four = sinusoid_table(4 * 16, 8)
    assert torch.equal(along_time(four, 4), four)
    eight = along_time(four, 8)
    assert eight.shape == (1, 8 * 16, 8)
    assert torch.equal(eight[0, :16], four[0, :16]) and torch.allclose(eight[0, -16:], four[0, -16:])
