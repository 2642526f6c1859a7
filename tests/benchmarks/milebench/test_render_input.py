"""``milebench render-input``: the exact text and image preprocessing a model gets for one sample."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import pytest
import yaml
from PIL import Image
from remote_checkpoints import FEATURES_PER_IMAGE, build_allava, build_qwen_vl_chat
from tiny_checks import tiny_port

from milebench.benchmarks.milebench.fixture.prepared import prepared_fixture
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.cli import main
from milebench.infer.hf_allava import HfAllavaAdapter, chat_text
from milebench.infer.records import IMAGE_PLACEHOLDER
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.io import atomic_write_jsonl
from milebench.spec.folder import DEFAULT_SPECS

TASK = "CLEVR-Change"


def smoke_specs(root: Path) -> Path:
    """A copy of the specs whose smoke run writes under ``root``."""
    specs_dir = root / "specs"
    shutil.copytree(DEFAULT_SPECS, specs_dir)
    run_file = specs_dir / "runs" / "smoke.yaml"
    run_data = yaml.safe_load(run_file.read_text())
    run_data["output_dir"] = str(root / "out")
    run_file.write_text(yaml.safe_dump(run_data))
    return specs_dir


def prepare_one(specs_dir: Path, model: str) -> PreparedSample:
    """One sample of TASK prepared for ``model``'s regime in the smoke run, as render-input reads it."""
    specs = load_specs(specs_dir)
    run = specs.run("smoke")
    paths = RunPaths.for_run(run)
    regime = model_regime(specs, run, model, Mode.MULTI_IMAGE)
    (sample, *_) = prepared_fixture(paths, [specs.tasks[TASK]], 1, regime=regime)[TASK]
    out = paths.prepared(TASK, Mode.MULTI_IMAGE, regime.id)
    atomic_write_jsonl(out, [sample.model_dump(mode="json")])
    return sample


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunPaths, PreparedSample]:
    """The smoke specs copy with the tiny LLaVA built and one task prepared for its regime."""
    specs_dir = smoke_specs(tmp_path_factory.mktemp("render"))
    specs = load_specs(specs_dir)
    paths = RunPaths.for_run(specs.run("smoke"))
    build_tiny(specs.models["tiny-llava"], paths.model_dir("tiny-llava"))
    return specs_dir, paths, prepare_one(specs_dir, "tiny-llava")


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, PreparedSample]]:
    """The smoke specs copy with ALLaVA and Qwen-VL-Chat on their stand-in checkpoints, one task
    prepared for each one's regime (counted with the stand-in's own tokenizer)."""
    root = tmp_path_factory.mktemp("render-remote")
    specs_dir = smoke_specs(root)
    samples = {}
    for name, build in (("allava-longer", build_allava), ("qwen-vl-chat", build_qwen_vl_chat)):
        model_file = specs_dir / "models" / f"{name}.yaml"
        data = yaml.safe_load(model_file.read_text())
        data["weights"]["repo_id"] = str(build(root / name))
        model_file.write_text(yaml.safe_dump(data))
        samples[name] = prepare_one(specs_dir, name)
    return specs_dir, samples


def picture_size(paths: RunPaths, image: str) -> tuple[int, int]:
    with Image.open(paths.data_root / image) as picture:
        return picture.size


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


def test_allava_shows_chat_s_turn_and_its_padded_pictures(
    remote: tuple[Path, dict[str, PreparedSample]], capsys: pytest.CaptureFixture[str]
) -> None:
    specs_dir, samples = remote
    sample = samples["allava-longer"]
    assert render(specs_dir, "allava-longer", TASK, sample.sample_id) == 0
    out = capsys.readouterr().out
    assert "model: allava-longer (hf-allava)\nexecution: paper\n  prompt_template: allava\n" in out
    text = chat_text(sample.prompt, len(sample.images))
    assert text.startswith("[INST] <image>\n<image>\n") and f"----- text -----\n{text}\n-----" in out
    paths = RunPaths.for_run(load_specs(specs_dir).run("smoke"))
    spec = load_specs(specs_dir).models["allava-longer"]
    ids = HfAllavaAdapter(spec, paths, paths.data_root, with_model=False).encode([sample])["input_ids"][0]
    n_images = len(sample.images)
    assert f"input: {len(ids) + n_images * (FEATURES_PER_IMAGE - 1)} tokens; " in out
    assert f"note: each image id (-200) becomes {FEATURES_PER_IMAGE} positions\n" in out
    for i, image in enumerate(sample.images):
        width, height = picture_size(paths, image)
        side = max(width, height)
        padding = f"padded with (122, 116, 104) to {side}x{side}" if width != height else "no padding"
        assert f"  {i + 1}. {image}: {width}x{height}, {padding} -> pixels (3, 16, 16)\n" in out


def test_qwen_vl_chat_shows_the_chatml_turn_chat_tokenizes(
    remote: tuple[Path, dict[str, PreparedSample]], capsys: pytest.CaptureFixture[str]
) -> None:
    specs_dir, samples = remote
    sample = samples["qwen-vl-chat"]
    assert render(specs_dir, "qwen-vl-chat", TASK, sample.sample_id) == 0
    out = capsys.readouterr().out
    assert "execution: paper\n  prompt_template: qwen_chat\n" in out and "  decoding: per_sample\n" in out
    paths = RunPaths.for_run(load_specs(specs_dir).run("smoke"))
    first = (paths.data_root / sample.images[0]).resolve()
    turn = out.split("----- text -----\n")[1].split("\n----- end of text -----")[0]
    assert turn.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n")
    assert turn.endswith("<|im_end|>\n<|im_start|>assistant\n") and f"Picture 1: <img>{first}</img>\n" in turn
    assert (
        "note: each picture is opened from the path in its <img> span by the checkpoint's visual module"
        in out
    )
    for i, image in enumerate(sample.images):
        width, height = picture_size(paths, image)
        assert f"  {i + 1}. {image}: {width}x{height}, no padding\n" in out


@pytest.mark.parametrize(
    ("paper_model", "adapter_kind", "template", "pads", "ids_per_image", "features_beyond_ids", "note"),
    [
        (
            "yi-vl",
            "hf-yi-vl",
            "yi_mm_default",
            True,
            1,
            15,
            "note: each image id (-200) becomes 16 positions\n",
        ),
        ("mantis", "hf-mantis", "mllava_v1", False, 16, 0, ""),
    ],
)
def test_ports_show_their_original_input(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    paper_model: str,
    adapter_kind: str,
    template: str,
    pads: bool,
    ids_per_image: int,
    features_beyond_ids: int,
    note: str,
) -> None:
    """Yi-VL and Mantis print their own turn format, the tokens their language model attends to (a
    Yi-VL picture is one id but the 16 features of the tiny tower) and their own image preprocessing."""
    model = tiny_port(paper_model, adapter_kind, paper_model)
    specs_dir = smoke_specs(tmp_path)
    (specs_dir / "models" / f"{model.name}.yaml").write_text(
        yaml.safe_dump(model.model_dump(mode="json", exclude_none=True))
    )
    paths = RunPaths.for_run(load_specs(specs_dir).run("smoke"))
    build_tiny(load_specs(specs_dir).models[model.name], paths.model_dir(model.name))
    sample = prepare_one(specs_dir, model.name)
    assert render(specs_dir, model.name, TASK, sample.sample_id) == 0
    out = capsys.readouterr().out
    adapter = load_adapter(load_specs(specs_dir).models[model.name], paths, paths.data_root)
    assert f"----- text -----\n{adapter.render(sample)}\n----- end of text -----\n" in out
    assert f"execution: paper\n  prompt_template: {template}\n" in out
    ids = adapter.encode([sample])["input_ids"][0]
    tokens = len(ids) + features_beyond_ids * len(sample.images)
    assert f"input: {tokens} tokens; each image token stands for {ids_per_image} ids\n{note}-----" in out
    width, height = picture_size(paths, sample.images[0])
    side = max(width, height)
    padding = f"padded with (122, 116, 104) to {side}x{side}" if pads and width != height else "no padding"
    assert f"  1. {sample.images[0]}: {width}x{height}, {padding} -> pixels (3, 32, 32)\n" in out


@pytest.fixture(scope="module")
def served_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, PreparedSample]:
    """The smoke specs copy with GPT-4o in its run and one task prepared for it."""
    specs_dir = smoke_specs(tmp_path_factory.mktemp("render-api"))
    run_file = specs_dir / "runs" / "smoke.yaml"
    run_data = yaml.safe_load(run_file.read_text())
    run_data["models"] = [*run_data["models"], "gpt-4o"]
    run_file.write_text(yaml.safe_dump(run_data))
    return specs_dir, prepare_one(specs_dir, "gpt-4o")


def test_an_api_model_shows_its_request_with_images_elided(
    served_run: tuple[Path, PreparedSample],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No key is needed to see the request, and none is shown; every image stands in place, its data out."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    specs_dir, sample = served_run
    assert render(specs_dir, "gpt-4o", TASK, sample.sample_id) == 0
    out = capsys.readouterr().out
    assert "POST https://api.openai.com/v1/chat/completions\n" in out
    assert "key: OPENAI_API_KEY, in the request's headers (not shown)\n" in out
    body = json.loads(
        out.split("----- request body -----\n")[1].split("\n----- end of request body -----")[0]
    )
    assert body["model"] == "gpt-4o" and body["temperature"] == 0
    content = body["messages"][0]["content"]
    images = [part["image_url"]["url"] for part in content if part["type"] == "image_url"]
    assert len(images) == len(sample.images)
    for url, path in zip(images, sample.images, strict=True):
        assert re.fullmatch(
            rf"data:image/\w+;base64,<image {re.escape(path)}: \d+ characters of base64 elided>", url
        )
    texts = "".join(part["text"] for part in content if part["type"] == "text")
    assert texts == sample.prompt.replace(IMAGE_PLACEHOLDER, "")
