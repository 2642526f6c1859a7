"""The tiny MiniGPT-v2: seeded, in the original's layout, loaded as the real parts are, and answering every
fixture task; a checkpoint that does not fit the spec is one error naming the model spec and the cause."""

from __future__ import annotations

from pathlib import Path

import pytest
from parity_golden import checkpoint_sha256
from tiny_checks import answers_every_fixture_task, tiny_port

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.adapter import AdapterError
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.infer.tiny_minigpt_v2 import CHECKPOINT_FILE, EVA_FILE, TOKENIZER_MODEL


def spec(seed: int = 0, n_tokens: int = 16):  # type: ignore[no-untyped-def]
    return tiny_port("minigpt-v2", "hf-minigpt-v2", "minigpt-v2", n_tokens, seed)


def test_same_seed_same_checkpoint_other_seed_other(tmp_path: Path) -> None:
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        build_tiny(spec(seed), tmp_path / name)
    assert checkpoint_sha256(tmp_path / "a") == checkpoint_sha256(tmp_path / "b")
    assert checkpoint_sha256(tmp_path / "a") != checkpoint_sha256(tmp_path / "c")
    assert {TOKENIZER_MODEL, EVA_FILE, CHECKPOINT_FILE} <= {p.name for p in (tmp_path / "a").iterdir()}


@pytest.mark.slow
def test_answers_every_fixture_task(tmp_path: Path) -> None:
    answers_every_fixture_task(spec(), tmp_path)


def test_a_budget_the_vision_tower_does_not_give_is_refused(tmp_path: Path) -> None:
    paths = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    build_tiny(spec(), paths.model_dir("tiny-minigpt-v2"))
    wrong = spec().model_copy(update={"n_tokens_per_image": 64})
    with pytest.raises(AdapterError, match=r"'tiny-minigpt-v2': n_tokens_per_image 64.*gives 16"):
        load_adapter(wrong, paths, paths.data_root)


def test_a_missing_checkpoint_file_names_the_file(tmp_path: Path) -> None:
    paths = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    build_tiny(spec(), paths.model_dir("tiny-minigpt-v2"))
    (paths.model_dir("tiny-minigpt-v2") / CHECKPOINT_FILE).unlink()
    with pytest.raises(AdapterError, match=CHECKPOINT_FILE.replace(".", r"\.")):
        load_adapter(spec(), paths, paths.data_root)
