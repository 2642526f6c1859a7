"""ALLaVA-3B-Longer through the hf-allava adapter, on a stand-in of the checkpoint's remote code loaded by
``from_pretrained(..., trust_remote_code=True)`` as the hub repository is: ALLaVA's chat turn and input
ids exactly, pictures padded to squares of the mean colour, one ``generate`` per sample over that
sample's own pictures, the end-of-text stop the checkpoint's config does not name, the window measured
with every picture's features, and the engine end to end."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
from picture_samples import picture_sample, write_pictures
from PIL import Image
from remote_checkpoints import FEATURES_PER_IMAGE, build_allava, hub_spec

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.infer.adapter import AdapterError, SampleFailure
from milebench.infer.engine import run_model
from milebench.infer.execution_check import UnsupportedExecution
from milebench.infer.hf_allava import IMAGE_TOKEN_INDEX, HfAllavaAdapter, chat_text, interleaved_text
from milebench.infer.image_preprocessing import expand_to_square
from milebench.infer.records import FailureKind, Prediction
from milebench.infer.registry import load_adapter
from milebench.io import read_jsonl
from milebench.spec.execution import PAPER, Decoding, ImagePreprocessing
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import for_run
from milebench.spec.policy import ContextOverflow, RunPolicy

SIZES = [(40, 30), (32, 32), (20, 50), (64, 16)]
CLIP_MEAN_COLOUR = (122, 116, 104)


def allava_spec(folder: Path, **fields: Any) -> ModelSpec:
    return hub_spec("allava-longer", folder, **fields)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_allava(tmp_path_factory.mktemp("standin") / "allava-standin")


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    root = tmp_path_factory.mktemp("allava")
    run_paths = RunPaths(out=root, reports=root / "reports")
    write_pictures(run_paths, SIZES)
    return run_paths


def load(checkpoint: Path, paths: RunPaths, **fields: Any) -> HfAllavaAdapter:
    adapter = load_adapter(allava_spec(checkpoint, **fields), paths, paths.data_root)
    assert isinstance(adapter, HfAllavaAdapter)
    return adapter


@pytest.fixture(scope="module")
def adapter(checkpoint: Path, paths: RunPaths) -> HfAllavaAdapter:
    return load(checkpoint, paths)


def test_chat_moderates_the_text_and_puts_every_picture_first() -> None:
    prompt = picture_sample(0, 3).prompt
    assert chat_text(prompt, 3) == (
        "[INST] <image>\n<image>\n<image>\nAnswer.\n slide 0  slide 1  slide 2 which is red? [/INST] "
    )
    assert chat_text("  Is <s>this</s> an <image> tag? <ImageHere> ", 1) == (
        "[INST] <image>\n  Is this an  tag? [/INST] "
    )


def test_the_interleaved_variant_keeps_each_picture_at_its_placeholder() -> None:
    assert interleaved_text(picture_sample(0, 2).prompt) == (
        "[INST] Answer.\n<image> slide 0 <image> slide 1 which is red? [/INST] "
    )
    assert interleaved_text("Before <ImageHere><ImageHere>after <image></s>") == (
        "[INST] Before <image>\n<image>\nafter [/INST] "
    )


def test_input_ids_are_chunks_without_special_tokens_joined_by_image_ids(adapter: HfAllavaAdapter) -> None:
    sample = picture_sample(0, 3)
    tokenizer = adapter.processor.tokenizer
    chunks = [
        tokenizer(c, add_special_tokens=False).input_ids for c in adapter.render(sample).split("<image>")
    ]
    expected = chunks[0]
    for chunk in chunks[1:]:
        expected += [IMAGE_TOKEN_INDEX, *chunk]
    ids = adapter.encode([sample])["input_ids"][0].tolist()
    assert ids == expected and ids.count(IMAGE_TOKEN_INDEX) == 3
    assert (
        ids[:2]
        == tokenizer("[INST] ", add_special_tokens=False).input_ids[:2]
        != [tokenizer.bos_token_id] * 2
    )


def test_pictures_are_padded_to_squares_of_the_mean_colour(adapter: HfAllavaAdapter, paths: RunPaths) -> None:
    sample = picture_sample(0, 3)
    pixels = adapter.encode([sample])["images"]
    processor = adapter.processor.image_processor
    for i, rel in enumerate(sample.images):
        with Image.open(paths.data_root / rel) as picture:
            square = expand_to_square(picture.convert("RGB"), CLIP_MEAN_COLOUR)
            plain = processor(picture.convert("RGB"), return_tensors="pt")["pixel_values"][0]
        assert torch.equal(pixels[i], processor(square, return_tensors="pt")["pixel_values"][0])
        assert torch.equal(pixels[i], plain) == (SIZES[i][0] == SIZES[i][1]), rel


def test_each_sample_is_generated_alone_over_its_own_pictures(
    adapter: HfAllavaAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model keeps the image features of its first pass until they are cleared: every sample must
    reach it with its own pictures encoded, in a call of its own."""
    rows: list[int] = []
    encoded: list[int] = []
    generate, encode_images = adapter.model.generate, adapter.model.encode_images

    def counted_generate(**kwargs: Any) -> Any:
        rows.append(int(kwargs["input_ids"].shape[0]))
        return generate(**kwargs)

    def counted_encode(images: torch.Tensor) -> Any:
        encoded.append(int(images.shape[0]))
        return encode_images(images)

    monkeypatch.setattr(adapter.model, "generate", counted_generate)
    monkeypatch.setattr(adapter.model, "encode_images", counted_encode)
    answers = adapter.generate([picture_sample(0, 3), picture_sample(1, 1), picture_sample(2, 2)])
    assert all(isinstance(a, str) for a in answers)
    assert (rows, encoded) == ([1, 1, 1], [3, 1, 2])


def test_answers_are_greedy_and_depend_on_the_pictures(
    checkpoint: Path, paths: RunPaths, tmp_path: Path
) -> None:
    sample = picture_sample(0, 3)
    first = load(checkpoint, paths).generate([sample])
    for seed in (1, 2):
        assert (
            load(checkpoint, paths, generation={"max_new_tokens": 6, "seed": seed}).generate([sample])
            == first
        )
    recoloured = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    write_pictures(recoloured, SIZES)
    for i, size in enumerate(SIZES[:3]):
        Image.new("RGB", size, (255, 255 - 80 * i, 0)).save(recoloured.data_root / f"WebQA/images/{i}.png")
    other = load_adapter(allava_spec(checkpoint), recoloured, recoloured.data_root).generate([sample])
    assert other != first


def test_generation_ends_at_end_of_text_although_the_config_names_none(
    checkpoint: Path, paths: RunPaths
) -> None:
    """A model whose every step prefers end-of-text: the first step may not end (min_new_tokens 1), so
    it emits the next best id, and the second ends the answer."""
    adapter = load(checkpoint, paths)
    assert adapter.model.config.eos_token_id is None
    eos = adapter.processor.tokenizer.eos_token_id
    with torch.no_grad():
        adapter.model.lm_head.weight.zero_()
        adapter.model.lm_head.bias.zero_()
        adapter.model.lm_head.bias[eos] = 10.0
    [answer] = adapter.generate([picture_sample(0, 1)])
    first_other = 1 if eos == 0 else 0
    assert answer == adapter.processor.tokenizer.decode([first_other]).strip()
    assert adapter.last_usage()[0].output_tokens == 1


def test_the_window_counts_every_picture_as_its_features(checkpoint: Path, paths: RunPaths) -> None:
    sample = picture_sample(0, 3)
    unlimited = load(checkpoint, paths)
    answer = unlimited.generate([sample])
    n_tokens = unlimited.last_usage()[0].input_tokens
    n_ids = len(unlimited.encode([sample])["input_ids"][0])
    assert n_tokens == n_ids + 3 * (FEATURES_PER_IMAGE - 1)
    assert load(checkpoint, paths, max_context_len=10).generate([sample]) == answer, (
        "answered over the window"
    )
    strict = RunPolicy(context_overflow=ContextOverflow.REFUSE)
    exact = load_adapter(allava_spec(checkpoint, max_context_len=n_tokens), paths, paths.data_root, strict)
    assert exact.generate([sample]) == answer
    short = load_adapter(
        allava_spec(checkpoint, max_context_len=n_tokens - 1), paths, paths.data_root, strict
    )
    assert short.generate([sample]) == [
        SampleFailure(
            FailureKind.CONTEXT_OVERFLOW, f"input of {n_tokens} tokens exceeds max_context_len {n_tokens - 1}"
        )
    ]


def test_the_paper_run_uses_allava_s_own_chat() -> None:
    specs = load_specs()
    execution = for_run(specs.models["allava-longer"], specs.run("paper")).execution
    assert execution is not None and execution.label == PAPER
    assert (execution.prompt_template, execution.image_preprocessing, execution.decoding) == (
        "allava",
        ImagePreprocessing.PAD_TO_SQUARE,
        Decoding.PER_SAMPLE,
    )
    assert execution.stop_strings == ()
    assert execution.with_variant("interleaved").prompt_template == "allava_interleaved"


def test_choices_the_adapter_cannot_make_are_refused_by_name(checkpoint: Path, paths: RunPaths) -> None:
    paper = load_specs().models["allava-longer"].execution
    assert paper is not None
    for change, named in [
        ({"decoding": "batched"}, "decoding: batched (supported: per_sample)"),
        ({"stop_strings": ["</s>"]}, "stop_strings: ['</s>'] (supported: [])"),
        ({"prompt_template": "llava_llama_2"}, "prompt_template: llava_llama_2 (supported: allava, "),
    ]:
        execution = {**paper.model_dump(mode="json"), **change}
        with pytest.raises(UnsupportedExecution, match="adapter hf-allava cannot run " + re.escape(named)):
            load(checkpoint, paths, execution=execution)


def test_remote_code_must_be_trusted(checkpoint: Path, paths: RunPaths) -> None:
    with pytest.raises(AdapterError, match="trust_remote_code: true"):
        load(checkpoint, paths, weights={"kind": "hf", "repo_id": str(checkpoint)})


def test_engine_answers_over_the_image_limit_and_resumes(
    adapter: HfAllavaAdapter, checkpoint: Path, tmp_path: Path
) -> None:
    """A sample over the spec's max_images (3) is answered and records by how many it went over; a
    rerun reuses every answer."""
    model = allava_spec(checkpoint)
    samples = [picture_sample(0, 1), picture_sample(1, 4), picture_sample(2, 2)]
    out = tmp_path / "predictions.jsonl"
    summary = run_model(adapter, model, samples, out)
    assert (summary.total, summary.failed, summary.over_window) == (3, 0, 1)
    predictions = {p.sample_id: p for p in (Prediction.model_validate(r) for r in read_jsonl(out))}
    over = predictions[1].over_window
    assert over is not None and (over.images, over.max_images, over.images_over) == (4, 3, 1)
    assert all(p.response is not None and p.input_tokens for p in predictions.values())
    assert run_model(adapter, model, samples, out).reused == 3
