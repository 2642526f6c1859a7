"""The generic image-text-to-text adapter on a tiny LLaVA checkpoint that carries a chat template:
AutoProcessor + AutoModelForImageTextToText, content parts per image in order, inputs past the window
(generated and recorded, or refused under the strict variant)."""

from __future__ import annotations

from pathlib import Path

import pytest
from picture_samples import picture_sample, write_pictures
from transformers import AutoProcessor, LlavaForConditionalGeneration

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.infer.adapter import AdapterError, SampleFailure
from milebench.infer.engine import run_model
from milebench.infer.hf_image_text_to_text import HfImageTextToTextAdapter
from milebench.infer.records import FailureKind, Prediction
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny_llava
from milebench.io import read_jsonl
from milebench.spec.model import ModelSpec
from milebench.spec.policy import ContextOverflow, RunPolicy

TEMPLATE = (
    "{% for message in messages %}{{ message['role'] | upper }}: "
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>"
    "{% else %}{{ part['text'] }}{% endif %}{% endfor %}\n{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def spec(
    adapter: str = "hf-image-text-to-text", max_context_len: int = 2048, sample_timeout_s: float | None = None
) -> ModelSpec:
    return ModelSpec.model_validate(
        {
            "name": "tiny-generic",
            "display_name": "Tiny generic",
            "section": "kit",
            "adapter": adapter,
            "weights": {"kind": "tiny", "family": "llava", "seed": 0},
            "max_context_len": max_context_len,
            "n_tokens_per_image": 16,
            "generation": {"max_new_tokens": 6},
            "sample_timeout_s": sample_timeout_s,
        }
    )


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    root = tmp_path_factory.mktemp("generic")
    run_paths = RunPaths(out=root, reports=root / "reports")
    folder = run_paths.model_dir("tiny-generic")
    build_tiny_llava(spec(), folder)
    processor = AutoProcessor.from_pretrained(folder)
    processor.chat_template = TEMPLATE
    processor.save_pretrained(folder)
    write_pictures(run_paths, [(40, 30), (32, 32), (20, 50)])
    return run_paths


def test_loads_through_auto_classes_and_renders_parts_in_order(paths: RunPaths) -> None:
    adapter = load_adapter(spec(), paths, paths.data_root)
    assert type(adapter) is HfImageTextToTextAdapter
    assert isinstance(adapter.model, LlavaForConditionalGeneration)
    assert adapter.render(picture_sample(0, 3)) == (
        "USER: Answer.\n<image> slide 0 <image> slide 1 <image> slide 2 which is red?ASSISTANT:"
    )
    inputs = adapter.encode([picture_sample(0, 3)])
    assert int((inputs["input_ids"] == adapter.processor.image_token_id).sum()) == 48
    assert inputs["pixel_values"].shape[0] == 3


def test_generates_deterministically_for_one_and_three_images(paths: RunPaths) -> None:
    adapter = load_adapter(spec(), paths, paths.data_root)
    batch = [picture_sample(0, 1), picture_sample(1, 3)]
    first = adapter.generate(batch)
    # The seeded checkpoint's greedy answers (random weights: bytes, some of them not UTF-8).
    assert first == ["~Gmbers\ufffdke", "\\Ch/d\ufffd"]
    assert adapter.generate(batch) == first
    assert load_adapter(spec(), paths, paths.data_root).generate(batch) == first
    alone = adapter.generate([picture_sample(1, 3)])
    assert alone == first[1:]
    usage = adapter.last_usage()
    assert usage[0].input_tokens is not None and usage[0].input_tokens > 48
    assert usage[0].output_tokens is not None and 1 <= usage[0].output_tokens <= 6


def test_input_longer_than_the_context_is_generated_and_its_excess_recorded(
    paths: RunPaths, tmp_path: Path
) -> None:
    """As the official code: the template and image tokens push a sample past the window, and it is
    answered anyway, exactly as without the limit; the prediction records the tokens over."""
    short = spec(max_context_len=60)
    batch = [picture_sample(0, 3), picture_sample(1, 1)]
    reference = load_adapter(spec(), paths, paths.data_root).generate(batch)
    adapter = load_adapter(short, paths, paths.data_root)
    assert adapter.generate(batch) == reference
    n_input = adapter.last_usage()[0].input_tokens
    assert n_input is not None and n_input > 60
    out = tmp_path / "predictions.jsonl"
    summary = run_model(adapter, short, batch, out)
    saved = [Prediction.model_validate(row) for row in read_jsonl(out)]
    assert (summary.failed, summary.over_window) == (0, 1)
    assert [p.response for p in saved] == reference
    excess = saved[0].over_window
    assert excess is not None and (excess.input_tokens, excess.tokens_over) == (n_input, n_input - 60)
    assert saved[1].over_window is None


def test_the_strict_variant_refuses_an_input_longer_than_the_context(paths: RunPaths) -> None:
    strict = RunPolicy(context_overflow=ContextOverflow.REFUSE)
    adapter = load_adapter(spec(max_context_len=60), paths, paths.data_root, strict)
    answers = adapter.generate([picture_sample(0, 3), picture_sample(1, 1)])
    assert isinstance(answers[0], SampleFailure)
    assert answers[0].kind is FailureKind.CONTEXT_OVERFLOW
    assert "exceeds max_context_len 60" in answers[0].detail
    assert answers[1] == "~Gmbers\ufffdke"
    reference = load_adapter(spec(), paths, paths.data_root).generate([picture_sample(1, 1)])
    assert answers[1:] == reference


def test_generation_past_the_time_limit_is_a_timeout(paths: RunPaths) -> None:
    batch = [picture_sample(0, 1), picture_sample(1, 3)]
    reference = load_adapter(spec(), paths, paths.data_root).generate(batch)
    assert load_adapter(spec(sample_timeout_s=3600), paths, paths.data_root).generate(batch) == reference
    strict = load_adapter(spec(sample_timeout_s=1e-9), paths, paths.data_root)
    answers = strict.generate(batch)
    assert [a.kind if isinstance(a, SampleFailure) else a for a in answers] == [FailureKind.TIMEOUT] * 2
    assert isinstance(answers[0], SampleFailure)
    assert answers[0].detail == "generation passed 1e-09 s per sample (2 in the batch) after 1 new tokens"
    assert [u.output_tokens for u in strict.last_usage()] == [1, 1]


def test_a_model_class_this_transformers_lacks_is_a_clear_error(paths: RunPaths) -> None:
    class FutureAdapter(HfImageTextToTextAdapter):
        model_class = "NotYetAModelClass"

    with pytest.raises(AdapterError, match=r"transformers \S+ has no NotYetAModelClass; run it in a"):
        FutureAdapter(spec(), paths, paths.data_root)


def test_wrong_tiny_family_for_the_adapter_is_refused(paths: RunPaths) -> None:
    with pytest.raises(AdapterError, match=r"tiny family 'llava' cannot run on adapter 'hf-qwen2-vl'"):
        load_adapter(spec(adapter="hf-qwen2-vl"), paths, paths.data_root)
