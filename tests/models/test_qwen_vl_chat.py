"""Qwen-VL-Chat through the hf-qwen-vl-chat adapter, on a stand-in remote-code checkpoint loaded by
``from_pretrained(..., trust_remote_code=True)`` exactly as the hub repository is: the interleaved query,
greedy deterministic answers, exact token counts, per-sample failures and the engine end to end; the
execution its spec states, the choices it refuses and the dtype reaching the checkpoint's switch."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import torch
from picture_samples import picture_sample, write_pictures
from PIL import Image
from remote_checkpoints import build_qwen_vl_chat, hub_spec

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.provenance import job_provenance
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.infer.adapter import AdapterError, SampleFailure
from milebench.infer.engine import run_model
from milebench.infer.execution_check import UnsupportedExecution
from milebench.infer.hf_qwen_vl_chat import HfQwenVLChatAdapter, precision_flags
from milebench.infer.records import FailureKind, Prediction
from milebench.infer.registry import load_adapter
from milebench.io import read_jsonl
from milebench.spec.execution import PAPER, Decoding, Dtype, Tokenization
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import for_run
from milebench.spec.policy import ContextOverflow, RunPolicy

SIZES = [(40, 30), (32, 32), (20, 50), (64, 16)]
IMAGE_SPAN = 258
"""Tokens per image in the stand-in, as in Qwen-VL-Chat: <img>, 256 path or pad tokens, </img>."""


def spec(folder: Path, **fields: Any) -> ModelSpec:
    return hub_spec("qwen-vl-chat", folder, **fields)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_qwen_vl_chat(tmp_path_factory.mktemp("standin") / "qwen-vl-chat-standin")


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    root = tmp_path_factory.mktemp("qwenvlchat")
    run_paths = RunPaths(out=root, reports=root / "reports")
    write_pictures(run_paths, SIZES)
    return run_paths


@pytest.fixture(scope="module")
def adapter(checkpoint: Path, paths: RunPaths) -> HfQwenVLChatAdapter:
    loaded = load_adapter(spec(checkpoint), paths, paths.data_root)
    assert isinstance(loaded, HfQwenVLChatAdapter)
    return loaded


def test_query_interleaves_pictures_in_prompt_order(adapter: HfQwenVLChatAdapter, paths: RunPaths) -> None:
    folder = (paths.data_root / "WebQA/images").resolve()
    assert adapter.query(picture_sample(0, 3)) == (
        f"Answer.\nPicture 1: <img>{folder}/0.png</img>\n slide 0 "
        f"Picture 2: <img>{folder}/1.png</img>\n slide 1 "
        f"Picture 3: <img>{folder}/2.png</img>\n slide 2 which is red?"
    )


def test_answers_are_greedy_deterministic_and_counted(
    adapter: HfQwenVLChatAdapter, checkpoint: Path, paths: RunPaths
) -> None:
    batch = [picture_sample(0, 3), picture_sample(1, 1)]
    first = adapter.generate(batch)
    assert first == ["\ufffd%%%%%", "))))))"]  # the seeded checkpoint's greedy answers
    usage = adapter.last_usage()
    queries = [adapter.query(s) for s in batch]
    assert [u.input_tokens for u in usage] == [adapter.input_tokens(q) for q in queries]
    assert usage[0].input_tokens is not None and usage[0].input_tokens > 3 * IMAGE_SPAN
    assert all(u.output_tokens is not None and 1 <= u.output_tokens <= 6 for u in usage)
    assert adapter.generate(batch) == first
    assert adapter.generate(batch[1:]) == first[1:]
    for seed in (1, 2, 3):
        reseeded = spec(checkpoint, generation={"max_new_tokens": 6, "seed": seed})
        assert load_adapter(reseeded, paths, paths.data_root).generate(batch) == first, "greedy, not sampled"


def test_answers_depend_on_the_pictures(checkpoint: Path, paths: RunPaths, tmp_path: Path) -> None:
    """The same prompt over one other picture gets another answer: the model reads the files."""
    recoloured = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    write_pictures(recoloured, SIZES)
    Image.new("RGB", SIZES[0], (0, 0, 255)).save(recoloured.data_root / "WebQA/images/0.png")
    sample = picture_sample(0, 3)
    original = load_adapter(spec(checkpoint), paths, paths.data_root).generate([sample])
    assert load_adapter(spec(checkpoint), recoloured, recoloured.data_root).generate([sample]) != original


def test_a_turn_past_the_window_is_answered_as_without_the_limit(checkpoint: Path, paths: RunPaths) -> None:
    sample = picture_sample(0, 2)
    answer = load_adapter(spec(checkpoint), paths, paths.data_root).generate([sample])
    short = load_adapter(spec(checkpoint, max_context_len=10), paths, paths.data_root)
    assert short.generate([sample]) == answer


def test_the_strict_variant_limit_is_exact_and_skips_the_model(
    checkpoint: Path, paths: RunPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample = picture_sample(0, 2)
    unlimited = load_adapter(spec(checkpoint), paths, paths.data_root)
    answer = unlimited.generate([sample])
    n_tokens = unlimited.last_usage()[0].input_tokens
    assert n_tokens is not None
    strict = RunPolicy(context_overflow=ContextOverflow.REFUSE)
    exact = load_adapter(spec(checkpoint, max_context_len=n_tokens), paths, paths.data_root, strict)
    assert exact.generate([sample]) == answer
    short = load_adapter(spec(checkpoint, max_context_len=n_tokens - 1), paths, paths.data_root, strict)
    monkeypatch.setattr(short.model, "chat", _no_call)
    [failure] = short.generate([sample])
    assert failure == SampleFailure(
        FailureKind.CONTEXT_OVERFLOW, f"input of {n_tokens} tokens exceeds max_context_len {n_tokens - 1}"
    )


def _no_call(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the model was called")


def test_a_missing_picture_fails_that_sample_only(adapter: HfQwenVLChatAdapter, paths: RunPaths) -> None:
    missing = picture_sample(7, 2).model_copy(update={"images": ("WebQA/images/0.png", "WebQA/images/9.png")})
    failure, answer = adapter.generate([missing, picture_sample(1, 1)])
    assert isinstance(failure, SampleFailure) and failure.kind is FailureKind.ADAPTER_ERROR
    assert "task WebQA, sample 7" in failure.detail and "9.png" in failure.detail
    assert answer == adapter.generate([picture_sample(1, 1)])[0]


def test_the_standin_opens_the_paths_it_is_given(adapter: HfQwenVLChatAdapter, tmp_path: Path) -> None:
    query = adapter.tokenizer.from_list_format([{"image": str(tmp_path / "absent.png")}, {"text": "hi"}])
    with pytest.raises(FileNotFoundError, match=r"absent\.png"):
        adapter.model.chat(adapter.tokenizer, query, history=None)


def test_a_time_limit_stops_generation_as_a_timeout(checkpoint: Path, paths: RunPaths) -> None:
    """A limit shorter than one token: generation stops after the first (never an end token, since
    min_new_tokens is 1), so the answer is recorded as a timeout."""
    limited = load_adapter(spec(checkpoint, sample_timeout_s=1e-9), paths, paths.data_root)
    [failure] = limited.generate([picture_sample(0, 1)])
    assert isinstance(failure, SampleFailure) and failure.kind is FailureKind.TIMEOUT
    assert limited.last_usage()[0].output_tokens == 1


def test_remote_code_must_be_trusted(checkpoint: Path, paths: RunPaths) -> None:
    untrusted = spec(checkpoint, weights={"kind": "hf", "repo_id": str(checkpoint)})
    with pytest.raises(AdapterError, match="trust_remote_code: true"):
        load_adapter(untrusted, paths, paths.data_root)


def test_engine_answers_and_resumes(checkpoint: Path, paths: RunPaths, tmp_path: Path) -> None:
    """A sample over max_images is answered, as the official code would have, and records by how many
    images it went over; every sample is answered once, with token counts, and a rerun reuses every
    answer. The strict variant refuses that sample without a model call."""
    model = spec(checkpoint, max_images=2)
    adapter = load_adapter(model, paths, paths.data_root)
    calls: list[str] = []
    chat = adapter.model.chat

    def counted(tokenizer: Any, query: str, **kwargs: Any) -> Any:
        calls.append(query)
        return chat(tokenizer, query, **kwargs)

    adapter.model.chat = counted
    samples = [picture_sample(0, 1), picture_sample(1, 3), picture_sample(2, 2), picture_sample(3, 1)]
    out = tmp_path / "predictions.jsonl"
    summary = run_model(adapter, model, samples, out)
    assert (summary.total, summary.failed, summary.over_window) == (4, 0, 1)
    predictions = {p.sample_id: p for p in (Prediction.model_validate(r) for r in read_jsonl(out))}
    over = predictions[1].over_window
    assert over is not None and (over.images, over.max_images, over.images_over, over.tokens_over) == (
        3,
        2,
        1,
        0,
    )
    assert len(calls) == 4, "one call per sample"
    assert all(p.response and p.input_tokens and p.output_tokens for p in predictions.values())
    assert predictions[0].response == predictions[3].response, "same pictures and prompt text"
    rerun = run_model(adapter, model, samples, out)
    assert (rerun.reused, len(calls)) == (4, 4)

    strict_out = tmp_path / "strict.jsonl"
    strict = run_model(
        adapter, model, samples, strict_out, policy=RunPolicy(context_overflow=ContextOverflow.REFUSE)
    )
    assert (strict.failed, strict.failures, len(calls)) == (1, {"context_overflow": 1}, 7)
    assert not any("Picture 3" in q for q in calls[4:]), "the refused sample never reaches the model"


def test_the_spec_states_how_the_checkpoint_runs_and_the_record_shows_it() -> None:
    specs = load_specs()
    run = specs.run("paper")
    model = for_run(specs.models["qwen-vl-chat"], run)
    execution = model.execution
    assert execution is not None and execution.label == PAPER
    assert (execution.prompt_template, execution.tokenization, execution.decoding, execution.dtype) == (
        "qwen_chat",
        Tokenization.WHOLE,
        Decoding.PER_SAMPLE,
        Dtype.BFLOAT16,
    )
    assert execution.stop_strings == () and "greedy" in (execution.source or "")
    record = job_provenance(
        stage="infer",
        specs=specs,
        run=run,
        model=model,
        task="ALFRED",
        mode="multi-image",
        outputs=(),
        fetch_manifest=Path("absent"),
        started_at=datetime.now(UTC),
    )
    assert record.execution == execution


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"decoding": "batched"}, "decoding: batched (supported: per_sample)"),
        ({"autocast": "bfloat16"}, "autocast: bfloat16 (supported: off)"),
        ({"stop_strings": ["<|endoftext|>"]}, "stop_strings: ['<|endoftext|>'] (supported: [])"),
        ({"prompt_template": "chat_template"}, "prompt_template: chat_template (supported: qwen_chat)"),
        (
            {"image_preprocessing": "pad_to_square"},
            "image_preprocessing: pad_to_square (supported: processor)",
        ),
        ({"image_backend": "pil"}, "image_backend: pil (supported: default)"),
    ],
)
def test_choices_the_checkpoint_code_does_not_make_are_refused_before_loading(
    change: dict[str, Any], named: str, paths: RunPaths, tmp_path: Path
) -> None:
    execution = load_specs().models["qwen-vl-chat"].execution
    assert execution is not None
    absent = tmp_path / "no-checkpoint-here"
    model = spec(absent, execution={**execution.model_dump(mode="json"), **change})
    with pytest.raises(UnsupportedExecution, match="adapter hf-qwen-vl-chat cannot run " + re.escape(named)):
        load_adapter(model, paths, paths.data_root)


def test_a_spec_without_execution_is_refused(checkpoint: Path, paths: RunPaths) -> None:
    with pytest.raises(AdapterError, match="the spec must state its execution"):
        load_adapter(spec(checkpoint, execution=None), paths, paths.data_root)


def test_the_dtype_reaches_the_checkpoint_precision_switch(adapter: HfQwenVLChatAdapter) -> None:
    """On a GPU the execution's dtype is the flag the checkpoint converts itself with (without one it
    would pick bfloat16 whatever the spec says); on the CPU the kit runs float32."""
    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    assert precision_flags(Dtype.FLOAT16, gpu) == {"fp16": True}
    assert precision_flags(Dtype.BFLOAT16, gpu) == {"bf16": True}
    assert precision_flags(Dtype.FLOAT32, gpu) == {"fp32": True}
    assert precision_flags(Dtype.BFLOAT16, cpu) == {"fp32": True}
    config = adapter.model.config
    assert (config.bf16, config.fp16, config.fp32) == (False, False, True)
    assert {p.dtype for p in adapter.model.parameters()} == {torch.float32}
