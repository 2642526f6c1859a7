"""Original-code parity for Video-LLaMA-2: its own Chat (the ``video_llama`` package of
github.com/DAMO-NLP-SG/Video-LLaMA in an environment of its era: ``Chat.ask``, ``Chat.upload_img`` per
picture, ``Chat.answer``) and the kit's hf-video-llama-2 adapter under video-llama-2's paper execution give
identical texts, input ids (each piece's ids, one image id between pieces), pixel tensors, input embeddings
(each picture's video Q-Former outputs in place, after ``Chat.answer``'s cut), generated ids and answers on a
sample of every mini-MileBench task, both reading one tiny checkpoint in the original's layout.

The kit side always runs and is held to the golden fixture ``tests/golden/parity/video-llama-2.json``, what
Video-LLaMA's code produced (``tests/parity_golden.py``). The live comparison needs that code (the kit
carries none of it): ``bash .ci/original-code.sh`` unpacks ``video_llama/`` and ``eval_configs/`` at the
commit the kit follows into ``.original-code/Video-LLaMA``, or ``MILEBENCH_VIDEO_LLAMA_2_CODE`` names such a
folder; and its environment (``bash .ci/video-llama-2-official.sh`` makes ``.venv-video-llama-2``;
``MILEBENCH_VIDEO_LLAMA_2_PYTHON`` names another). Without them only the live comparison skips; with them
and ``MILEBENCH_RECORD_PARITY=1`` it re-records the fixture. Both sides run float32 on the CPU.

Two forms are mapped before comparing: transformers 4.28 starts the output of an embeddings-only
``generate`` with a BOS it never fed the model (dropped, as ``Chat.answer`` drops it), and where the
generated ids hold a run of byte tokens that is not UTF-8 the slow SentencePiece decoder and the kit's
decode it differently, so such an answer is compared by its ids and, in its place, the decoding of the same
ids without byte tokens with ``<s>`` and ``</s>`` put in (the driver's ``probe``), which holds the kit's
decoding to the slow tokenizer's.

The ``video-frames`` variant is compared the same way with the original's video path
(``Chat.upload_video_without_audio``, ``Chat.ask``, ``Chat.answer``; the driver's ``--frames``), its
pixels those of all frames in order, and held to its own fixture
``tests/golden/parity/video-llama-2-video-frames.json``. A sample with more pictures than the frame
position embedding has rows (``max_frame_pos``) stops the original's upload with an ``IndexError``; the
kit refuses it by name (context overflow), and both are written as that error with the pixels given.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from llava_official.parity import REPO, run_original
from parity_golden import (
    Meta,
    Observed,
    Setup,
    assert_matches,
    compare_live,
    pinned_commit,
    require_original,
    set_up,
)
from test_cheetor_parity import driver_observed, key, kit_observed
from tiny_checks import tiny_port

from milebench.benchmarks.milebench.records import PreparedSample
from milebench.infer.adapter import SampleFailure
from milebench.infer.hf_video_llama_2 import HfVideoLlama2Adapter
from milebench.infer.records import FailureKind
from milebench.infer.registry import load_adapter
from milebench.spec.execution import PAPER
from milebench.spec.model import ModelSpec

FAMILY = "video-llama-2"
PYTHON = Path(os.environ.get("MILEBENCH_VIDEO_LLAMA_2_PYTHON") or REPO / ".venv-video-llama-2/bin/python")
CODE = Path(os.environ.get("MILEBENCH_VIDEO_LLAMA_2_CODE") or REPO / ".original-code/Video-LLaMA")
DRIVER = Path(__file__).parents[1] / "video_llama_2_official" / "official_video_llama_2.py"
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 16
FRAMES = "video-frames"
PAST_FRAME_POSITIONS = "IndexError: index out of range in self"
"""What stops the original's upload of a video with more frames than its frame position embedding has."""


def parity_spec(variant: str = PAPER) -> ModelSpec:
    model = tiny_port("video-llama-2", "hf-video-llama-2", "video-llama-2")
    assert model.execution is not None
    return model.model_copy(
        update={
            "generation": model.generation.model_copy(update={"max_new_tokens": MAX_NEW_TOKENS}),
            "execution": model.execution.with_variant(variant),
        }
    )


def family(variant: str) -> str:
    """The golden fixture of a reading: the paper's keeps the family's name."""
    return FAMILY if variant == PAPER else f"{FAMILY}-{variant}"


def meta(built: Setup, variant: str) -> Meta:
    """The run's meta; a variant's names the variant among the settings."""
    if variant == PAPER:
        return built.meta
    return built.meta.model_copy(update={"settings": {**built.meta.settings, "variant": variant}})


def max_length() -> int:
    """``Chat.answer``'s ``max_length``: the spec's ``max_context_len``."""
    budget = parity_spec().max_context_len
    assert budget is not None
    return budget


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    return set_up(
        tmp_path_factory.mktemp("videollama2parity"),
        parity_spec(),
        SAMPLES_PER_TASK,
        lambda folder: None,
        "github.com/DAMO-NLP-SG/Video-LLaMA (video_llama/, eval_configs/)",
        pinned_commit("VIDEO_LLAMA"),
        {"max_new_tokens": MAX_NEW_TOKENS, "max_length": max_length()},
    )


@pytest.fixture(scope="module", params=[PAPER, FRAMES])
def variant(request: pytest.FixtureRequest) -> str:
    """The paper's reading (each picture a one-frame video at its placeholder) and the video-frames one."""
    value: str = request.param
    return value


@pytest.fixture(scope="module")
def adapter(built: Setup, variant: str) -> HfVideoLlama2Adapter:
    loaded = load_adapter(parity_spec(variant), built.paths, built.paths.data_root)
    assert isinstance(loaded, HfVideoLlama2Adapter)
    return loaded


@pytest.fixture(scope="module")
def kit(built: Setup, adapter: HfVideoLlama2Adapter) -> dict[str, Observed]:
    """The kit adapter's outputs on every sample: what it feeds the model and what it generates, or, for a
    sample it refuses, the pixels it got and the original's error in place of the answer."""
    observed = {}
    for sample in built.samples:
        inputs = adapter.encode([sample])
        (row,) = adapter.split_rows(inputs)
        if adapter.overflowing([sample], inputs):
            observed[key(sample)] = refused(adapter, sample, row["pixel_values"])
            continue
        with torch.inference_mode():
            given = adapter.generate_inputs(row)
        observed[key(sample)] = kit_observed(adapter, sample, row, given, {})
    return observed


def refused(adapter: HfVideoLlama2Adapter, sample: PreparedSample, pixels: torch.Tensor) -> Observed:
    """A sample past the frame positions: the kit's answer is a context-overflow failure naming the limit,
    written as the original's error."""
    (failure,) = adapter.generate([sample])
    assert isinstance(failure, SampleFailure), key(sample)
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW, failure
    limit = adapter.processor.shape.max_frame_pos
    assert f"{len(sample.images)} pictures" in failure.detail and f"{limit} (max_frame_pos)" in failure.detail
    return Observed(sample, "", [], {"pixel_values": pixels}, [], PAST_FRAME_POSITIONS)


def original_side(
    built: Setup, adapter: HfVideoLlama2Adapter, variant: str, out: Path
) -> dict[str, Observed]:
    """Video-LLaMA's code run on every sample, in the kit's form (the placeholder BOS dropped)."""
    run_original(
        PYTHON,
        DRIVER,
        *("--code", str(CODE), "--model", str(built.original), "--samples", str(built.listed)),
        *("--max-new-tokens", str(MAX_NEW_TOKENS), "--max-length", str(max_length()), "--out", str(out)),
        *(["--frames"] if variant == FRAMES else []),
    )
    return driver_observed(built, adapter.processor.tokenizer, out)


def test_original_code_gives_what_the_kit_gives(
    built: Setup, adapter: HfVideoLlama2Adapter, variant: str, kit: dict[str, Observed], tmp_path: Path
) -> None:
    """Live: the original code on the same checkpoint and samples; re-records the reading's fixture when
    asked (``-k`` selects one reading: ``paper`` or ``video-frames``)."""
    require_original(
        PYTHON.is_file() and (CODE / "video_llama" / "conversation" / "conversation_video.py").is_file(),
        "needs Video-LLaMA's code (`bash .ci/original-code.sh`, or MILEBENCH_VIDEO_LLAMA_2_CODE) and its "
        "environment (`bash .ci/video-llama-2-official.sh`, or MILEBENCH_VIDEO_LLAMA_2_PYTHON)",
    )
    original = original_side(built, adapter, variant, tmp_path)
    compare_live(family(variant), original, kit, meta(built, variant), PYTHON)


def test_kit_gives_what_the_original_code_gave(
    built: Setup, adapter: HfVideoLlama2Adapter, variant: str, kit: dict[str, Observed]
) -> None:
    """Golden: every fixture task is covered, and the kit matches the recorded original field for field;
    in the video-frames reading exactly the samples with more pictures than ``max_frame_pos`` fail."""
    assert {s.task for s in built.samples} == {k.split("/")[0] for k in kit}
    limit = adapter.processor.shape.max_frame_pos
    past = {key(s) for s in built.samples if len(s.images) > limit} if variant == FRAMES else set()
    assert {k for k, seen in kit.items() if seen.answer == PAST_FRAME_POSITIONS} == past
    assert_matches(family(variant), kit, meta(built, variant))
