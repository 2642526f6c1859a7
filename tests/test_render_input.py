"""``milebench render-input``: the exact text and image preprocessing a model gets for one sample."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from PIL import Image
from tiny_checks import smoke_with, tiny_port

from milebench.cli import main
from milebench.infer.registry import load_adapter
from milebench.paths import RunPaths
from milebench.preprocess.regime import model_regime
from milebench.records import PreparedSample
from milebench.spec.registry import load_specs
from milebench.spec.run import Mode

TASK = "CLEVR-Change"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunPaths, PreparedSample]:
    """A copy of the specs whose smoke run writes under a temporary folder, with the tiny LLaVA built
    and one task prepared for its regime."""
    return smoke_with(tmp_path_factory.mktemp("render"), load_specs().models["tiny-llava"], TASK)


def render(specs_dir: Path, model: str, task: str, sample: int) -> int:
    argv = ["--specs", str(specs_dir), "render-input", "--run", "smoke", "--model", model]
    return main([*argv, "--task", task, "--mode", "multi-image", "--sample", str(sample)])


def test_prints_the_text_and_each_picture(
    setup: tuple[Path, RunPaths, PreparedSample], capsys: pytest.CaptureFixture[str]
) -> None:
    specs_dir, paths, sample = setup
    assert render(specs_dir, "tiny-llava", TASK, sample.sample_id) == 0
    out = capsys.readouterr().out
    adapter = load_adapter(load_specs(specs_dir).models["tiny-llava"], paths, paths.data_root)
    text = adapter.render(sample)
    assert text.startswith("[INST] <<SYS>>\n") and text.endswith(" [/INST]")
    assert f"----- text -----\n{text}\n----- end of text -----\n" in out
    assert "execution: paper\n  prompt_template: llava_llama_2\n" in out
    with Image.open(paths.data_root / sample.images[0]) as picture:
        width, height = picture.size
    side = max(width, height)
    padding = f"padded with (122, 116, 104) to {side}x{side}" if width != height else "no padding"
    assert f"  1. {sample.images[0]}: {width}x{height}, {padding} -> pixels (3, 32, 32)\n" in out
    assert f"images: {len(sample.images)}\n" in out


def test_missing_prepared_input_names_the_file_and_the_command(
    setup: tuple[Path, RunPaths, PreparedSample], caplog: pytest.LogCaptureFixture
) -> None:
    specs_dir, paths, _ = setup
    with caplog.at_level(logging.ERROR):
        assert render(specs_dir, "tiny-llava", "TQA", 0) == 1
    (message,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    regime = model_regime(
        load_specs(specs_dir), load_specs(specs_dir).run("smoke"), "tiny-llava", Mode.MULTI_IMAGE
    )
    assert message == (
        f"{paths.prepared('TQA', Mode.MULTI_IMAGE, regime.id)}: prepared samples not found; run "
        f"`milebench preprocess --run smoke --task TQA --mode multi-image --regime {regime.id}` first"
    )


def test_unknown_sample_and_other_adapters_are_one_line_errors(
    setup: tuple[Path, RunPaths, PreparedSample], caplog: pytest.LogCaptureFixture
) -> None:
    specs_dir, _, sample = setup
    with caplog.at_level(logging.ERROR):
        assert render(specs_dir, "tiny-llava", TASK, 99) == 1
        assert render(specs_dir, "random", TASK, 0) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors[0].endswith(f"{TASK}.jsonl: no sample 99 (ids {sample.sample_id}..{sample.sample_id})")
    assert errors[1] == (
        "model spec 'random': render-input shows the transformers adapters' input; "
        "adapter random builds its own"
    )


@pytest.mark.parametrize(
    ("paper_model", "adapter_kind", "template", "pads", "features_beyond_ids", "note"),
    [
        ("yi-vl", "hf-yi-vl", "yi_mm_default", True, 15, "each image id (-200) stands for 16 features"),
        ("mantis", "hf-mantis", "mllava_v1", False, 0, "each image token stands for 16 ids"),
    ],
)
def test_ports_show_their_original_input(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    paper_model: str,
    adapter_kind: str,
    template: str,
    pads: bool,
    features_beyond_ids: int,
    note: str,
) -> None:
    """Yi-VL and Mantis print their own turn format, the tokens their language model attends to (a
    Yi-VL picture is one id but 16 features of the tiny tower) and their own image preprocessing."""
    model = tiny_port(paper_model, adapter_kind, paper_model)
    specs_dir, paths, sample = smoke_with(tmp_path, model, TASK)
    assert render(specs_dir, model.name, TASK, sample.sample_id) == 0
    out = capsys.readouterr().out
    adapter = load_adapter(load_specs(specs_dir).models[model.name], paths, paths.data_root)
    assert f"----- text -----\n{adapter.render(sample)}\n----- end of text -----\n" in out
    assert f"execution: paper\n  prompt_template: {template}\n" in out
    ids = adapter.encode([sample])["input_ids"][0]
    assert f"input: {len(ids) + features_beyond_ids * len(sample.images)} tokens; {note}\n" in out
    with Image.open(paths.data_root / sample.images[0]) as picture:
        width, height = picture.size
    side = max(width, height)
    padding = f"padded with (122, 116, 104) to {side}x{side}" if pads and width != height else "no padding"
    assert f"  1. {sample.images[0]}: {width}x{height}, {padding} -> pixels (3, 32, 32)\n" in out
