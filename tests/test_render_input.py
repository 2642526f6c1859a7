"""``milebench render-input``: the exact text and image preprocessing a model gets for one sample."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import yaml
from PIL import Image

from milebench.cli import main
from milebench.fixture.prepared import prepared_fixture
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.io import atomic_write_jsonl
from milebench.paths import RunPaths
from milebench.preprocess.regime import model_regime
from milebench.records import PreparedSample
from milebench.spec.registry import DEFAULT_SPECS, load_specs
from milebench.spec.run import Mode

TASK = "CLEVR-Change"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunPaths, PreparedSample]:
    """A copy of the specs whose smoke run writes under a temporary folder, with the tiny LLaVA built
    and one task prepared for its regime."""
    root = tmp_path_factory.mktemp("render")
    specs_dir = root / "specs"
    shutil.copytree(DEFAULT_SPECS, specs_dir)
    run_file = specs_dir / "runs" / "smoke.yaml"
    run_data = yaml.safe_load(run_file.read_text())
    run_data["output_dir"] = str(root / "out")
    run_file.write_text(yaml.safe_dump(run_data))
    specs = load_specs(specs_dir)
    run = specs.run("smoke")
    paths = RunPaths.for_run(run)
    build_tiny(specs.models["tiny-llava"], paths.model_dir("tiny-llava"))
    regime = model_regime(specs, run, "tiny-llava", Mode.MULTI_IMAGE)
    (sample, *_) = prepared_fixture(paths, [specs.tasks[TASK]], 1, regime=regime)[TASK]
    out = paths.prepared(TASK, Mode.MULTI_IMAGE, regime.id)
    atomic_write_jsonl(out, [sample.model_dump(mode="json")])
    return specs_dir, paths, sample


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
        "model spec 'random': render-input shows the input of adapters that run local weights; "
        "adapter random builds its own"
    )
