"""The tiny LLaMA-VID: seeded, in the original's layout (its parts at the paths its config names), loaded
as the real parts are; a checkpoint or execution that does not fit is one error naming the model spec and
the cause. Its answers on every fixture task are held to the original code by test_llama_vid_parity."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_checks import same_seed_same_checkpoint, tiny_port

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.adapter import AdapterError
from milebench.infer.execution_check import UnsupportedExecution
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.infer.tiny_llama_vid import BERT_DIR, EVA_FILE, INDEX, PROCESSOR_DIR
from milebench.spec.execution import ImageSequence
from milebench.spec.model import ModelSpec

NAME = "tiny-llama-vid"


def spec(seed: int = 0, n_tokens: int = 2) -> ModelSpec:
    return tiny_port("llama-vid", "hf-llama-vid", "llama-vid", n_tokens, seed)


def built(tmp_path: Path) -> RunPaths:
    paths = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    build_tiny(spec(), paths.model_dir(NAME))
    return paths


def test_same_seed_same_checkpoint_other_seed_other(tmp_path: Path) -> None:
    folder = same_seed_same_checkpoint(spec, tmp_path)
    for part in (EVA_FILE, INDEX, f"{PROCESSOR_DIR}/preprocessor_config.json", f"{BERT_DIR}/vocab.txt"):
        assert (folder / part).is_file(), part


def test_a_budget_other_than_two_tokens_a_frame_is_refused(tmp_path: Path) -> None:
    paths = built(tmp_path)
    wrong = spec().model_copy(update={"n_tokens_per_image": 16})
    with pytest.raises(AdapterError, match=r"'tiny-llama-vid': n_tokens_per_image 16.*gives 2 tokens"):
        load_adapter(wrong, paths, paths.data_root)


def test_pictures_at_their_placeholders_are_refused_by_name(tmp_path: Path) -> None:
    paths = built(tmp_path)
    execution = spec().execution
    assert execution is not None
    wrong = spec().model_copy(
        update={"execution": execution.model_copy(update={"image_sequence": ImageSequence.IMAGES})}
    )
    with pytest.raises(UnsupportedExecution, match=r"image_sequence: images \(supported: video_frames\)"):
        load_adapter(wrong, paths, paths.data_root)


def test_a_missing_vision_tower_names_the_file(tmp_path: Path) -> None:
    paths = built(tmp_path)
    (paths.model_dir(NAME) / EVA_FILE).unlink()
    with pytest.raises(AdapterError, match=r"'tiny-llama-vid'.*eva_vit_g\.pth"):
        load_adapter(spec(), paths, paths.data_root)
