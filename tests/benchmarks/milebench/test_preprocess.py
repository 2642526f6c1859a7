"""The preprocess command per input regime: shared files, truncation records, skips, combined pictures."""

from __future__ import annotations

import argparse
import json
import logging
import os
import struct
import warnings
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from milebench.benchmarks.milebench.fixture.generate import write_tree
from milebench.benchmarks.milebench.paths import UNLIMITED_REGIME, RunPaths
from milebench.benchmarks.milebench.plan import model_regimes, prepare_jobs
from milebench.benchmarks.milebench.preprocess import commands
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.records import PreparedSample, TruncationRecord
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.run import Mode, RunSpec
from milebench.infer.tiny import build_tokenizer
from milebench.io import read_jsonl
from milebench.preprocess.tokenizer import TokenizerError, load_tokenizer
from milebench.spec.model import ModelSpec

REAL = load_specs()
STANDIN = Path(__file__).parents[2] / "qwen_vl_chat_standin"
"""A stand-in for the Qwen-VL-Chat hub repository: config, tokenizer and model as remote code."""
TASKS = ("ActionSequence", "SlideVQA", "GPR1200")


def model(name: str, **kw: Any) -> ModelSpec:
    fields: dict[str, Any] = {
        "name": name,
        "display_name": name,
        "section": "kit",
        "adapter": "hf-llava",
        "weights": {"kind": "tiny", "family": "llava"},
        "max_context_len": 96,
        "n_tokens_per_image": 16,
    }
    return ModelSpec.model_validate({**fields, **kw})


def specs_for(root: Path, out: Path, **run_fields: Any) -> Specs:
    run = RunSpec.model_validate(
        {
            "name": "t",
            "description": "test",
            "models": ["random", "small", "small-twin"],
            "tasks": list(TASKS),
            "modes": ["multi-image", "combined-image"],
            "data": {"kind": "fixture"},
            "output_dir": str(out),
            **run_fields,
        }
    )
    models = {"random": REAL.models["random"], "small": model("small"), "small-twin": model("small-twin")}
    return Specs(root=root, tasks=REAL.tasks, models=models, runs={"t": run})


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Specs, RunPaths]:
    """The mini-MileBench for three tasks and the tiny LLaVA tokenizer in each small model's folder."""
    specs = specs_for(tmp_path, tmp_path / "out")
    paths = RunPaths.for_run(specs.runs["t"])
    write_tree(paths.out / "data", [REAL.tasks[t] for t in TASKS], seed=0, samples_per_task=3)
    for name in ("small", "small-twin"):
        build_tokenizer().save_pretrained(paths.model_dir(name))
    monkeypatch.setattr(commands, "load_specs", lambda _root: specs)
    return specs, paths


def preprocess(task: str, mode: Mode, regime: str, workers: int = 1) -> int:
    args = argparse.Namespace(
        run="t", task=task, mode=mode, regime=regime, workers=workers, specs=Path("unused"), root=Path(".")
    )
    return commands.preprocess(args)


def prepared(paths: RunPaths, task: str, mode: Mode, regime: str) -> list[PreparedSample]:
    return [PreparedSample.model_validate(r) for r in read_jsonl(paths.prepared(task, mode, regime))]


def record(sample: PreparedSample) -> TruncationRecord:
    assert sample.truncation is not None
    return sample.truncation


def manifest(paths: RunPaths, task: str, mode: Mode, regime: str) -> dict[str, Any]:
    return json.loads(paths.prepared_manifest(task, mode, regime).read_text())


def test_small_context_drops_images_on_the_mini_fixture(setup: tuple[Specs, RunPaths]) -> None:
    specs, paths = setup
    run = specs.runs["t"]
    small = model_regime(specs, run, "small", Mode.MULTI_IMAGE).id
    assert preprocess("ActionSequence", Mode.MULTI_IMAGE, small) == 0
    samples = prepared(paths, "ActionSequence", Mode.MULTI_IMAGE, small)
    records = [record(s) for s in samples]
    assert all(r.mode == "paper" and r.max_context_len == 96 for r in records)
    assert all(
        r.images_kept + r.images_dropped_budget + r.images_unpaired == s.n_images
        for r, s in zip(records, samples, strict=True)
    )
    assert all(r.images_dropped_budget > 0 and r.truncated for r in records)
    for s in samples:
        assert len(s.images) == record(s).images_kept == s.prompt.count("<ImageHere>")
        assert s.prompt.endswith("\nYour answer is: ")  # the question and choices survive
    m = manifest(paths, "ActionSequence", Mode.MULTI_IMAGE, small)
    assert m["models"] == ["small"] and m["regime_id"] == small  # small-twin counts with its own folder
    assert m["images_dropped_budget"] == sum(r.images_dropped_budget for r in records)
    assert m["n_truncated"] == 3 and m["skipped"] == []

    assert preprocess("ActionSequence", Mode.MULTI_IMAGE, UNLIMITED_REGIME) == 0
    full = prepared(paths, "ActionSequence", Mode.MULTI_IMAGE, UNLIMITED_REGIME)
    assert all(record(s).images_dropped_budget == 0 for s in full)
    assert [len(s.images) for s in full] == [s.n_images for s in full]


def test_regimes_share_and_change_with_settings(tmp_path: Path) -> None:
    specs = specs_for(tmp_path, tmp_path / "out")
    run = specs.runs["t"]
    ids = model_regimes(specs, run)
    assert ids[("random", Mode.MULTI_IMAGE)] == UNLIMITED_REGIME
    assert ids[("small", Mode.MULTI_IMAGE)] != ids[("small-twin", Mode.MULTI_IMAGE)]  # own tokenizer folders
    base = model_regime(specs, run, "small", Mode.MULTI_IMAGE)
    longer = Specs(
        root=tmp_path,
        tasks=specs.tasks,
        models={**specs.models, "small": model("small", max_context_len=97)},
        runs=specs.runs,
    )
    assert model_regime(longer, run, "small", Mode.MULTI_IMAGE).id != base.id
    clean = run.model_copy(update={"truncation": "clean"})
    assert model_regime(specs, clean, "small", Mode.MULTI_IMAGE).id != base.id
    assert model_regime(specs, run, "small", Mode.COMBINED_IMAGE).id != base.id
    assert model_regime(specs, run, "small", Mode.MULTI_IMAGE).id == base.id  # stable
    jobs = prepare_jobs(specs, run)
    assert len(jobs) == len(TASKS) * 3 * 2  # per mode: full, small, small-twin


def test_paper_run_shares_one_unlimited_file_among_models_without_budget() -> None:
    run = REAL.run("paper")
    ids = model_regimes(REAL, run)
    unlimited = [m for m in run.models if ids[(m, Mode.MULTI_IMAGE)] == UNLIMITED_REGIME]
    assert {"random", "gpt-4v", "claude-3-opus"} <= set(unlimited)  # API models: no counting tokenizer
    assert ids[("llava-1.5-7b", Mode.MULTI_IMAGE)].startswith("ctx4096-paper-")
    assert ids[("qwen-vl-chat", Mode.MULTI_IMAGE)].startswith("ctx8192-paper-")
    assert ids[("qwen-vl-chat", Mode.COMBINED_IMAGE)].startswith("ctx8192-paper-combined1-")


def test_a_remote_code_tokenizer_counts_when_the_spec_trusts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Qwen-VL-Chat's tokenizer is the repository's own code: with ``trust_remote_code: true`` in the
    spec, its regimes (combined-image included) are prepared with it. The stand-in's byte-level tokenizer
    counts one token per UTF-8 byte, so the kept context counts its own byte length, and every kept
    image its 256 tokens."""
    qwen = REAL.models["qwen-vl-chat"]
    weights = qwen.weights.model_copy(update={"repo_id": str(STANDIN)})
    specs = specs_for(tmp_path, tmp_path / "out")
    specs.runs["t"] = specs.runs["t"].model_copy(update={"models": ("qwen-vl-chat",)})
    specs.models["qwen-vl-chat"] = qwen.model_copy(update={"weights": weights})
    paths = RunPaths.for_run(specs.runs["t"])
    write_tree(paths.out / "data", [REAL.tasks[t] for t in TASKS], seed=0, samples_per_task=3)
    monkeypatch.setattr(commands, "load_specs", lambda _root: specs)
    for mode in (Mode.COMBINED_IMAGE, Mode.MULTI_IMAGE):
        regime = model_regime(specs, specs.runs["t"], "qwen-vl-chat", mode)
        assert regime.tokenizer is not None and regime.tokenizer.kind == "hub-remote-code"
        assert preprocess("SlideVQA", mode, regime.id) == 0
        for sample in prepared(paths, "SlideVQA", mode, regime.id):
            counted = record(sample)
            pieces = sample.context.split("<ImageHere>")
            assert counted.max_context_len == 8192
            assert counted.text_tokens_kept == sum(len(piece.encode("utf-8")) for piece in pieces)
            if mode is Mode.MULTI_IMAGE:
                assert counted.image_tokens_kept == 256 * counted.images_kept
    with pytest.raises(TokenizerError, match="custom code"):
        load_tokenizer(STANDIN)


def test_bad_samples_fail_or_are_counted(
    setup: tuple[Specs, RunPaths], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    specs, paths = setup
    task_file = paths.data_root / "SlideVQA" / "SlideVQA.json"
    data = json.loads(task_file.read_text())
    bad = data["data"][1]
    (paths.data_root / "SlideVQA" / "images" / bad["task_instance"]["images_path"][-1]).write_bytes(b"junk")
    data["data"][2]["task_instruction_id"] = 99
    task_file.write_text(json.dumps(data))

    with caplog.at_level(logging.ERROR):
        assert preprocess("SlideVQA", Mode.MULTI_IMAGE, UNLIMITED_REGIME) == 1
    assert f"task SlideVQA, sample {bad['sample_id']}: Pillow cannot open image" in caplog.text
    assert not paths.prepared("SlideVQA", Mode.MULTI_IMAGE).exists()

    skipping = specs_for(specs.root, paths.out, skip_bad_samples=True)
    monkeypatch.setattr(commands, "load_specs", lambda _root: skipping)
    assert preprocess("SlideVQA", Mode.MULTI_IMAGE, UNLIMITED_REGIME) == 0
    m = manifest(paths, "SlideVQA", Mode.MULTI_IMAGE, UNLIMITED_REGIME)
    assert (m["n_samples"], m["n_prepared"]) == (3, 1)
    assert [s["sample_id"] for s in m["skipped"]] == [bad["sample_id"], data["data"][2]["sample_id"]]
    assert "Pillow cannot open image" in m["skipped"][0]["error"]
    assert "task_instruction_id 99 is out of range" in m["skipped"][1]["error"]
    assert len(prepared(paths, "SlideVQA", Mode.MULTI_IMAGE, UNLIMITED_REGIME)) == 1


def test_combined_mode_upstream_by_default_kit_tiles_for_more_pictures(
    setup: tuple[Specs, RunPaths], monkeypatch: pytest.MonkeyPatch
) -> None:
    specs, paths = setup
    regime = model_regime(specs, specs.runs["t"], "random", Mode.COMBINED_IMAGE).id
    assert preprocess("GPR1200", Mode.COMBINED_IMAGE, regime) == 0
    upstream = prepared(paths, "GPR1200", Mode.COMBINED_IMAGE, regime)
    assert all(s.images[0].startswith("GPR1200/combined_1_images/") for s in upstream)
    assert not any(paths.tiles("GPR1200", Mode.COMBINED_IMAGE, regime).iterdir())

    tiled_specs = specs_for(specs.root, paths.out, combined_pictures=2)
    monkeypatch.setattr(commands, "load_specs", lambda _root: tiled_specs)
    tiled_regime = model_regime(tiled_specs, tiled_specs.runs["t"], "random", Mode.COMBINED_IMAGE).id
    assert tiled_regime != regime
    assert preprocess("GPR1200", Mode.COMBINED_IMAGE, tiled_regime, workers=2) == 0
    tiled = prepared(paths, "GPR1200", Mode.COMBINED_IMAGE, tiled_regime)
    for s in tiled:
        assert len(s.images) == 2 and s.instruction.startswith("<ImageHere><ImageHere>\n")
        folder = paths.tiles("GPR1200", Mode.COMBINED_IMAGE, tiled_regime).resolve()
        assert all((paths.data_root / p).resolve().parent == folder for p in s.images)
    first = {p: (paths.data_root / p).read_bytes() for s in tiled for p in s.images}
    assert manifest(paths, "GPR1200", Mode.COMBINED_IMAGE, tiled_regime)["kit_pictures"] == 2 * len(tiled)
    assert preprocess("GPR1200", Mode.COMBINED_IMAGE, tiled_regime) == 0  # serial, from the cache
    again = prepared(paths, "GPR1200", Mode.COMBINED_IMAGE, tiled_regime)
    assert again == tiled
    assert {p: (paths.data_root / p).read_bytes() for s in again for p in s.images} == first


def test_unknown_regime_is_a_spec_error(setup: tuple[Specs, RunPaths]) -> None:
    with pytest.raises(ValueError, match="no model of run 't' reads regime 'nope'"):
        preprocess("GPR1200", Mode.MULTI_IMAGE, "nope")


def png_header(width: int, height: int) -> bytes:
    """A real, well-formed PNG that declares ``width`` x ``height`` but holds one row of pixel data:
    Pillow reads the size from IHDR without allocating the pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0"))
        + chunk(b"IEND", b"")
    )


def edit_sample(paths: RunPaths, task: str, index: int, change: Any) -> dict[str, Any]:
    """Apply ``change`` to sample ``index`` of the task's test set; return the sample as written."""
    task_file = paths.data_root / task / f"{task}.json"
    data = json.loads(task_file.read_text())
    change(data["data"][index])
    task_file.write_text(json.dumps(data))
    return data["data"][index]


def use_run(monkeypatch: pytest.MonkeyPatch, specs: Specs, paths: RunPaths, **run_fields: Any) -> Specs:
    """Make the preprocess command read run ``t`` with ``run_fields`` changed."""
    changed = specs_for(specs.root, paths.out, **run_fields)
    monkeypatch.setattr(commands, "load_specs", lambda _root: changed)
    return changed


@pytest.mark.parametrize("kind", ["relative", "absolute", "symlink"])
def test_image_outside_the_task_folder_is_refused(
    setup: tuple[Specs, RunPaths],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    kind: str,
) -> None:
    """A sample may read only files in its task's images folder, however its path is spelled."""
    specs, paths = setup
    images = paths.data_root / "SlideVQA" / "images"
    outside = tmp_path / "private" / "secret.png"
    outside.parent.mkdir()
    Image.new("RGB", (8, 8), (255, 0, 0)).save(outside)
    name = {"relative": os.path.relpath(outside, images), "absolute": str(outside), "symlink": "link.png"}[
        kind
    ]
    if kind == "symlink":
        (images / name).symlink_to(outside)
    bad = edit_sample(paths, "SlideVQA", 1, lambda s: s["task_instance"]["images_path"].__setitem__(-1, name))
    why = "is an absolute path; entries name files under" if kind == "absolute" else "resolves outside"
    reason = f"task_instance.images_path entry {name!r} {why} SlideVQA/images/"

    with caplog.at_level(logging.ERROR):
        assert preprocess("SlideVQA", Mode.MULTI_IMAGE, UNLIMITED_REGIME) == 1
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    source = paths.data_root / "SlideVQA" / "SlideVQA.json"
    target = "" if kind == "absolute" else f" (to {outside.resolve()})"
    assert line == f"{source}: task SlideVQA, sample {bad['sample_id']}: {reason}{target}"
    assert not paths.prepared("SlideVQA", Mode.MULTI_IMAGE).exists()

    use_run(monkeypatch, specs, paths, skip_bad_samples=True)
    assert preprocess("SlideVQA", Mode.MULTI_IMAGE, UNLIMITED_REGIME) == 0
    m = manifest(paths, "SlideVQA", Mode.MULTI_IMAGE, UNLIMITED_REGIME)
    (skipped,) = m["skipped"]
    assert skipped["sample_id"] == bad["sample_id"] and reason in skipped["error"]
    kept = prepared(paths, "SlideVQA", Mode.MULTI_IMAGE, UNLIMITED_REGIME)
    assert len(kept) == 2 and all(name not in s.images[-1] for s in kept)


def test_combined_picture_outside_its_folder_is_refused(
    setup: tuple[Specs, RunPaths], monkeypatch: pytest.MonkeyPatch
) -> None:
    specs, paths = setup
    name = "../images/" + edit_sample(paths, "GPR1200", 0, lambda s: None)["task_instance"]["images_path"][0]
    edit_sample(paths, "GPR1200", 0, lambda s: s["task_instance"].update(combined_1_images=[name]))
    use_run(monkeypatch, specs, paths, skip_bad_samples=True)
    regime = model_regime(specs, specs.runs["t"], "random", Mode.COMBINED_IMAGE).id
    assert preprocess("GPR1200", Mode.COMBINED_IMAGE, regime) == 0
    (skipped,) = manifest(paths, "GPR1200", Mode.COMBINED_IMAGE, regime)["skipped"]
    assert skipped["sample_id"] == 0
    assert f"task_instance.combined_1_images entry {name!r} resolves outside" in skipped["error"]


@pytest.mark.parametrize("side", [30000, 12000])
@pytest.mark.parametrize("combined", [False, True], ids=["interleaved", "kit-tiles"])
def test_oversized_image_is_a_bad_sample(
    setup: tuple[Specs, RunPaths],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    side: int,
    combined: bool,
) -> None:
    """A header declaring side x side pixels (a decompression bomb at 30000, over the limit at 12000) is
    refused from its header: a named error, or a skip, never Pillow's exception or warning."""
    specs, paths = setup
    mode = Mode.COMBINED_IMAGE if combined else Mode.MULTI_IMAGE
    fields: dict[str, Any] = {"combined_pictures": 2} if combined else {}
    bad = edit_sample(paths, "SlideVQA", 1, lambda s: None)
    image = paths.data_root / "SlideVQA" / "images" / bad["task_instance"]["images_path"][0]
    image.write_bytes(png_header(side, side))
    source = paths.data_root / "SlideVQA" / "SlideVQA.json"
    strict = use_run(monkeypatch, specs, paths, **fields)
    regime = model_regime(strict, strict.runs["t"], "random", mode).id
    reason = f"image {image} is over the limit of 89478485 pixels (max_image_pixels): "

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning Pillow lets out fails the test
        with caplog.at_level(logging.ERROR):
            assert preprocess("SlideVQA", mode, regime) == 1
        (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert line.startswith(f"{source}: task SlideVQA, sample {bad['sample_id']}: {reason}")
        assert f"{side * side} pixels" in line  # the declared size, however Pillow got to it
        assert not paths.prepared("SlideVQA", mode, regime).exists()

        use_run(monkeypatch, specs, paths, skip_bad_samples=True, **fields)
        assert preprocess("SlideVQA", mode, regime) == 0
    (skipped,) = manifest(paths, "SlideVQA", mode, regime)["skipped"]
    assert skipped["sample_id"] == bad["sample_id"] and reason in skipped["error"]
    assert len(prepared(paths, "SlideVQA", mode, regime)) == 2


def test_pixel_limit_is_a_run_setting_capped_at_pillows(
    setup: tuple[Specs, RunPaths], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lower limit refuses ordinary images; a higher one than Pillow's own is refused as a spec error."""
    specs, paths = setup
    assert RunSpec.model_fields["max_image_pixels"].default == Image.MAX_IMAGE_PIXELS
    use_run(monkeypatch, specs, paths, skip_bad_samples=True, max_image_pixels=100)
    assert preprocess("SlideVQA", Mode.MULTI_IMAGE, UNLIMITED_REGIME) == 0
    m = manifest(paths, "SlideVQA", Mode.MULTI_IMAGE, UNLIMITED_REGIME)
    assert m["n_prepared"] == 0 and len(m["skipped"]) == 3
    assert all("over the limit of 100 pixels (max_image_pixels)" in s["error"] for s in m["skipped"])
    with pytest.raises(ValueError, match="less than or equal to 89478485"):
        specs_for(specs.root, paths.out, max_image_pixels=Image.MAX_IMAGE_PIXELS + 1)
