"""The tiny random-weight OpenFlamingo through the open-flamingo adapter, run with open-flamingo's own
execution: built by the original factory, loaded by the same loader as a release, OpenFlamingo's text and
``vision_x``, the whole fixture answered, and each bad input one error naming its file and the fix."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from picture_samples import picture_sample
from tiny_checks import answers_every_fixture_task, state_dict_sha256, tiny_port, tiny_run

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.adapter import AdapterError
from milebench.infer.hf_open_flamingo import OpenFlamingoAdapter
from milebench.infer.open_flamingo_model import CHECKPOINT_FILE, LAYOUT_FILE
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.spec.model import ModelSpec

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("open_flamingo") is None,
    reason="the open-flamingo adapter drives the original package: `bash .ci/open-flamingo-kit.sh`",
)
SIZES = [(40, 24), (32, 32), (20, 50)]
"""Width x height: a wide picture, a square one, a tall one."""


def spec(seed: int = 0) -> ModelSpec:
    return tiny_port("open-flamingo", "open-flamingo", "open-flamingo", n_tokens=1, seed=seed)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    return tiny_run(tmp_path_factory.mktemp("flamingo"), spec(), SIZES)


@pytest.fixture(scope="module")
def adapter(paths: RunPaths) -> OpenFlamingoAdapter:
    loaded = load_adapter(spec(), paths, paths.data_root)
    assert isinstance(loaded, OpenFlamingoAdapter)
    return loaded


def test_same_seed_same_checkpoint(paths: RunPaths, tmp_path: Path) -> None:
    build_tiny(spec(0), tmp_path / "again")
    build_tiny(spec(1), tmp_path / "other")
    reference = state_dict_sha256(paths.model_dir(spec().name) / CHECKPOINT_FILE)
    assert state_dict_sha256(tmp_path / "again" / CHECKPOINT_FILE) == reference
    assert state_dict_sha256(tmp_path / "other" / CHECKPOINT_FILE) != reference


def test_each_picture_is_one_image_token_in_place_and_a_frame_of_vision_x(
    adapter: OpenFlamingoAdapter,
) -> None:
    sample = picture_sample(0, 3)
    text = adapter.render(sample)
    assert text.count("<image>") == 3 and "<|endofchunk|>" not in text
    assert text.index("<image> slide 0") < text.index("<image> slide 1") < text.index("<image> slide 2")
    (row,) = adapter.split_rows(adapter.encode([sample]))
    ids = row["input_ids"][0].tolist()
    assert ids.count(adapter.image_token_id) == 3
    vision_x = adapter.generate_inputs(row)["vision_x"]
    assert tuple(vision_x.shape) == (1, 3, 1, 3, 32, 32)  # (B, T_img, F, C, H, W)
    assert adapter.input_lengths(adapter.encode([sample])) == [len(ids)]  # a picture is one position


def test_the_chunked_variant_closes_each_picture_s_chunk(paths: RunPaths) -> None:
    base = spec()
    assert base.execution is not None
    chunked = base.model_copy(update={"execution": base.execution.with_variant("chunked")})
    loaded = load_adapter(chunked, paths, paths.data_root)
    assert isinstance(loaded, OpenFlamingoAdapter)
    text = loaded.render(picture_sample(0, 3))
    assert text.count("<|endofchunk|><image>") == 2 and not text.split("<image>")[0].endswith("|>")


def test_generation_stops_at_the_end_of_chunk_token(adapter: OpenFlamingoAdapter) -> None:
    eoc = adapter.processor.tokenizer.convert_tokens_to_ids("<|endofchunk|>")
    assert adapter.model.generation_config.eos_token_id == eoc == adapter.model.eoc_token_id


@pytest.mark.slow
def test_answers_every_fixture_task(tmp_path: Path) -> None:
    answers_every_fixture_task(spec(), tmp_path)


def test_a_missing_layout_names_its_file_and_the_build_command(paths: RunPaths, tmp_path: Path) -> None:
    copy = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    shutil.copytree(paths.model_dir(spec().name), copy.model_dir(spec().name))
    (copy.model_dir(spec().name) / LAYOUT_FILE).unlink()
    with pytest.raises(
        AdapterError, match=rf"{LAYOUT_FILE} not found; run `milebench tiny-model --model tiny-open"
    ):
        load_adapter(spec(), copy, copy.data_root)


def test_a_checkpoint_that_does_not_fit_the_architecture_names_the_file(
    paths: RunPaths, tmp_path: Path
) -> None:
    copy = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    folder = copy.model_dir(spec().name)
    shutil.copytree(paths.model_dir(spec().name), folder)
    layout = json.loads((folder / LAYOUT_FILE).read_text())
    (folder / LAYOUT_FILE).write_text(json.dumps({**layout, "cross_attn_every_n_layers": 1}))
    with pytest.raises(
        AdapterError, match=rf"{CHECKPOINT_FILE} does not fit the model built from .*unexpected keys"
    ):
        load_adapter(spec(), copy, copy.data_root)


def test_missing_weights_name_the_file_and_the_build_command(paths: RunPaths, tmp_path: Path) -> None:
    copy = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    folder = copy.model_dir(spec().name)
    shutil.copytree(paths.model_dir(spec().name), folder)
    (folder / CHECKPOINT_FILE).unlink()
    with pytest.raises(
        AdapterError, match=rf"checkpoint .*{CHECKPOINT_FILE} is missing; run `milebench tiny-model"
    ):
        load_adapter(spec(), copy, copy.data_root)


def test_an_import_failure_of_the_original_code_names_the_image_and_the_fix(
    paths: RunPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "open_flamingo", None)  # what an image without the package imports
    with pytest.raises(AdapterError, match=r"original code cannot be imported .*--family open-flamingo"):
        load_adapter(spec(), paths, paths.data_root)


def test_an_unknown_release_is_refused_by_name(paths: RunPaths) -> None:
    hub = ModelSpec.model_validate(
        {**spec().model_dump(mode="json"), "weights": {"kind": "hf", "repo_id": "someone/x"}}
    )
    with pytest.raises(AdapterError, match=r"'someone/x' is no OpenFlamingo release the kit knows"):
        load_adapter(hub, paths, paths.data_root)


def test_every_generate_is_one_sample(adapter: OpenFlamingoAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    rows: list[int] = []
    real = adapter.model.generate

    def counted(**kwargs: torch.Tensor) -> torch.Tensor:
        rows.append(int(kwargs["lang_x"].shape[0]))
        return real(**kwargs)

    monkeypatch.setattr(adapter.model, "generate", counted)
    answers = adapter.generate([picture_sample(0, 2), picture_sample(1, 3)])
    assert rows == [1, 1] and all(isinstance(a, str) for a in answers)
