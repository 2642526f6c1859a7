"""Original-code parity for VideoChat2: its own Chat (the ``video_chat2`` folder of
github.com/OpenGVLab/Ask-Anything in an environment of its era: ``Chat.ask`` and ``Chat.upload_img`` per
piece and picture, ``Chat.answer``) and the kit's hf-videochat2 adapter under videochat2's paper execution
give identical texts, input ids (each piece's ids, one image id between pieces), pixel tensors, input
embeddings (each picture's 96-query outputs, here the tiny model's, in place), generated ids and answers on
a sample of every mini-MileBench task, both reading one tiny checkpoint in the original's layout.

The kit side always runs and is held to the golden fixture ``tests/golden/parity/videochat2.json``, what
VideoChat2's code produced (``tests/parity_golden.py``). The live comparison needs that code (the kit
carries none of it): ``bash .ci/original-code.sh`` unpacks ``video_chat2/`` at the commit the kit follows
into ``.original-code/Ask-Anything/video_chat2``, or ``MILEBENCH_VIDEOCHAT2_CODE`` names such a folder; and
its environment (``bash .ci/videochat2-official.sh`` makes ``.venv-videochat2``;
``MILEBENCH_VIDEOCHAT2_PYTHON`` names another). Without them only the live comparison skips; with them and
``MILEBENCH_RECORD_PARITY=1`` it re-records the fixture. Both sides run float32 on the CPU. The forms are
mapped as ``tests/models/test_video_llama_2_parity.py`` maps them (the BOS an embeddings-only ``generate`` of
transformers 4.28 starts with, answers whose bytes are not text).

The ``video-frames`` variant is compared the same way with the original's video path (``demo.py``'s video
upload: ``Chat.upload_video``, then ``Chat.ask``, ``Chat.answer``; the driver's ``--frames``), its pixels
those of all frames in order, and held to its own fixture
``tests/golden/parity/videochat2-video-frames.json``. ``-k paper`` or ``-k video-frames`` with
``MILEBENCH_RECORD_PARITY=1`` re-records one reading's fixture only.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
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
from test_cheetor_parity import driver_observed, kit_outputs
from tiny_checks import tiny_port

from milebench.infer.hf_videochat2 import HfVideoChat2Adapter
from milebench.infer.registry import load_adapter
from milebench.spec.execution import PAPER
from milebench.spec.model import ModelSpec

FAMILY = "videochat2"
PYTHON = Path(os.environ.get("MILEBENCH_VIDEOCHAT2_PYTHON") or REPO / ".venv-videochat2/bin/python")
CODE = Path(os.environ.get("MILEBENCH_VIDEOCHAT2_CODE") or REPO / ".original-code/Ask-Anything/video_chat2")
DRIVER = Path(__file__).parents[1] / "videochat2_official" / "official_videochat2.py"
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 8
TOKENS_PER_IMAGE = 12
"""The tiny Q-Former's 4 queries and 8 extra queries."""
FRAMES = "video-frames"


def parity_spec(variant: str = PAPER) -> ModelSpec:
    model = tiny_port("videochat2", "hf-videochat2", "videochat2", TOKENS_PER_IMAGE)
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


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    return set_up(
        tmp_path_factory.mktemp("videochat2parity"),
        parity_spec(),
        SAMPLES_PER_TASK,
        lambda folder: None,
        "github.com/OpenGVLab/Ask-Anything (video_chat2/)",
        pinned_commit("ASK_ANYTHING"),
        {"max_new_tokens": MAX_NEW_TOKENS},
    )


@pytest.fixture(scope="module", params=[PAPER, FRAMES])
def variant(request: pytest.FixtureRequest) -> str:
    """The paper's reading (each picture a one-frame input at its placeholder) and the video-frames one."""
    value: str = request.param
    return value


@pytest.fixture(scope="module")
def adapter(built: Setup, variant: str) -> HfVideoChat2Adapter:
    loaded = load_adapter(parity_spec(variant), built.paths, built.paths.data_root)
    assert isinstance(loaded, HfVideoChat2Adapter)
    return loaded


@pytest.fixture(scope="module")
def kit(built: Setup, adapter: HfVideoChat2Adapter) -> dict[str, Observed]:
    """The kit adapter's outputs on every sample: what it feeds the model and what it generates."""
    return kit_outputs(adapter, built.samples)


def test_original_code_gives_what_the_kit_gives(
    built: Setup, adapter: HfVideoChat2Adapter, variant: str, kit: dict[str, Observed], tmp_path: Path
) -> None:
    """Live: the original code on the same checkpoint and samples; re-records the reading's fixture when
    asked (``-k`` selects one reading: ``paper`` or ``video-frames``)."""
    require_original(
        PYTHON.is_file() and (CODE / "conversation.py").is_file(),
        "needs VideoChat2's code (`bash .ci/original-code.sh`, or MILEBENCH_VIDEOCHAT2_CODE) and its "
        "environment (`bash .ci/videochat2-official.sh`, or MILEBENCH_VIDEOCHAT2_PYTHON)",
    )
    run_original(
        PYTHON,
        DRIVER,
        *("--code", str(CODE), "--model", str(built.original), "--samples", str(built.listed)),
        *("--max-new-tokens", str(MAX_NEW_TOKENS), "--out", str(tmp_path)),
        *(["--frames"] if variant == FRAMES else []),
    )
    original = driver_observed(built, adapter.processor.tokenizer, tmp_path)
    compare_live(family(variant), original, kit, meta(built, variant), PYTHON)


def test_kit_gives_what_the_original_code_gave(built: Setup, variant: str, kit: dict[str, Observed]) -> None:
    """Golden: every fixture task is covered, and the kit matches the recorded original field for field."""
    assert {s.task for s in built.samples} == {k.split("/")[0] for k in kit}
    assert_matches(family(variant), kit, meta(built, variant))
