"""The tiny Cheetor: seeded, in the original's layout, loaded as the real parts are, and answering every
fixture task; a checkpoint that does not fit the spec or the architecture, or lacks a part, is one error
naming the model spec and the file."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from llava_official.parity import listed_fixture
from tiny_checks import answers_every_fixture_task, same_seed_same_checkpoint, tiny_port

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_cheetor import HfCheetorAdapter
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.infer.tiny_cheetor import BLIP2_FILE, CHECKPOINT_FILE
from milebench.infer.tiny_minigpt_v2 import EVA_FILE, TOKENIZER_MODEL

NAME = "tiny-cheetor"


def spec(seed: int = 0, n_tokens: int = 16):  # type: ignore[no-untyped-def]
    return tiny_port("cheetor", "hf-cheetor", "cheetor", n_tokens, seed)


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


def test_vpg_c_changes_what_the_language_model_computes(tmp_path: Path) -> None:
    """The prompt pass after arming VPG-C gives other logits than the same embeddings without it, and
    the hook fires once: VPG-C is on the path, on the prompt's pass only."""
    paths = built(tmp_path)
    adapter = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(adapter, HfCheetorAdapter)
    sample = listed_fixture(spec(), paths, 1, tmp_path / "samples.json")[0]
    (row,) = adapter.split_rows(adapter.encode([sample]))
    with torch.inference_mode():
        given = adapter.generate_inputs(row)
        inputs = {"inputs_embeds": given["inputs_embeds"], "attention_mask": given["attention_mask"]}
        armed = adapter.model(**inputs).logits
        assert adapter.cheetor.pending is None
        plain = adapter.model(**inputs).logits
    assert not torch.equal(armed, plain)


def test_a_budget_the_q_former_does_not_give_is_refused(tmp_path: Path) -> None:
    paths = built(tmp_path)
    wrong = spec().model_copy(update={"n_tokens_per_image": 32})
    with pytest.raises(
        AdapterError, match=rf"'{NAME}': n_tokens_per_image 32.*gives 16 .*16 Q-Former queries"
    ):
        load_adapter(wrong, paths, paths.data_root)


@pytest.mark.parametrize("part", [CHECKPOINT_FILE, BLIP2_FILE, EVA_FILE])
def test_a_missing_part_names_the_file(tmp_path: Path, part: str) -> None:
    paths = built(tmp_path)
    (paths.model_dir(NAME) / part).unlink()
    with pytest.raises(AdapterError, match=part.replace(".", r"\.")):
        load_adapter(spec(), paths, paths.data_root)


def test_a_checkpoint_without_llama_proj_names_the_file_and_the_part(tmp_path: Path) -> None:
    paths = built(tmp_path)
    path = paths.model_dir(NAME) / CHECKPOINT_FILE
    state = torch.load(path, weights_only=True)["model"]
    torch.save({"model": {k: v for k, v in state.items() if not k.startswith("llama_proj.")}}, path)
    with pytest.raises(AdapterError, match=rf"'{NAME}': .*{CHECKPOINT_FILE}.* holds no .*llama_proj\.weight"):
        load_adapter(spec(), paths, paths.data_root)


def test_a_checkpoint_that_does_not_fit_the_architecture_names_the_file(tmp_path: Path) -> None:
    paths = built(tmp_path)
    path = paths.model_dir(NAME) / CHECKPOINT_FILE
    state = torch.load(path, weights_only=True)["model"]
    state["llama_model.model.llm_proj.weight"] = torch.zeros(3, 5)
    torch.save({"model": state}, path)
    with pytest.raises(AdapterError, match=rf"'{NAME}': .*{CHECKPOINT_FILE} does not fit the model"):
        load_adapter(spec(), paths, paths.data_root)
