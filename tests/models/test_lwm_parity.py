"""Original-code parity for LWM: its own inference path (``lwm/vision_chat.py``'s ``Sampler`` of the ``lwm``
package of github.com/LargeWorldModel/LWM, JAX on the CPU, in an environment of its era) and the kit's
torch port under lwm's paper execution give identical prompts, input ids (the VQGAN codes among them),
frames fed to the VQGAN, codes, generated ids and answers on every prepared sample of the mini-MileBench,
both reading one tiny checkpoint in LWM's files, each picture one vision.

The kit side always runs and is held to the golden fixture ``tests/golden/parity/lwm.json``, what LWM's
code produced (``tests/parity_golden.py``). The live comparison needs LWM's code (the kit carries none of
it): ``bash .ci/original-code.sh`` unpacks its ``lwm`` package at the commit the kit follows into
``.original-code/``, or ``MILEBENCH_LWM_CODE`` names a checkout at that commit; and its environment
(``bash .ci/lwm-official.sh`` makes ``.venv-lwm``; ``MILEBENCH_LWM_PYTHON`` names another). Without them
only the live comparison skips; with them and ``MILEBENCH_RECORD_PARITY=1`` it re-records the fixture (it
runs first, so the golden comparison then reads the new one). Both sides run float32 on the CPU.

The ``video-frames`` variant is compared the same way with the original's video path (the driver's
``--frames``: ``_read_process_vision`` given the sample's pictures as the frames decord would decode, so
it keeps ``max_n_frames`` of them by its own ``np.linspace``), the frames and codes those of the pictures
kept, and held to its own fixture ``tests/golden/parity/lwm-video-frames.json``; ``-k paper`` or
``-k video-frames`` with ``MILEBENCH_RECORD_PARITY=1`` re-records one reading's fixture only.
"""

from __future__ import annotations

import json
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
    original_outputs,
    pinned_commit,
    require_original,
    set_up,
)
from tiny_checks import tiny_port

from milebench.infer.hf_lwm import MAX_N_FRAMES, HfLwmAdapter
from milebench.infer.registry import load_adapter
from milebench.spec.execution import PAPER
from milebench.spec.model import ModelSpec

FAMILY = "lwm"
PYTHON_VAR = "MILEBENCH_LWM_PYTHON"
PYTHON = Path(os.environ.get(PYTHON_VAR) or REPO / ".venv-lwm/bin/python")
CODE = Path(os.environ.get("MILEBENCH_LWM_CODE") or REPO / ".original-code/LWM")
DRIVER = Path(__file__).parents[1] / "lwm_official" / "official_lwm.py"
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 16
TOKENS_PER_PICTURE = 257
WINDOW = 12288
"""The tiny model's ``max_sequence_length``: the original's causal mask and rotary table end there, and the
longest fixture prompt, padded as the Sampler pads it, with its new tokens fits."""
FRAMES = "video-frames"


def parity_spec(variant: str = PAPER) -> ModelSpec:
    model = tiny_port("lwm", "hf-lwm", "lwm", n_tokens=TOKENS_PER_PICTURE)
    assert model.execution is not None
    return model.model_copy(
        update={
            "max_context_len": WINDOW,
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
        tmp_path_factory.mktemp("lwmparity"),
        parity_spec(),
        SAMPLES_PER_TASK,
        lambda _: None,
        repository="github.com/LargeWorldModel/LWM (lwm/)",
        commit=pinned_commit("LWM"),
        settings={"max_new_tokens": MAX_NEW_TOKENS, "greedy": True},
    )


@pytest.fixture(scope="module", params=[PAPER, pytest.param(FRAMES, marks=pytest.mark.slow)])
def variant(request: pytest.FixtureRequest) -> str:
    """The paper's reading (each picture one vision) and the video-frames one (one vision of the frames
    kept; slow: the kit's side of it takes about half a minute on two cores, the VQGAN and generation)."""
    value: str = request.param
    return value


@pytest.fixture(scope="module")
def kit(built: Setup, variant: str) -> dict[str, Observed]:
    """The kit adapter's outputs on every sample."""
    adapter = load_adapter(parity_spec(variant), built.paths, built.paths.data_root)
    assert isinstance(adapter, HfLwmAdapter)
    observed = {}
    for sample in built.samples:
        inputs = adapter.encode([sample])
        (row,) = adapter.split_rows(inputs)
        observed[f"{sample.task}/{sample.sample_id}"] = Observed(
            sample=sample,
            text=adapter.render(sample),
            input_ids=row["input_ids"][0].tolist(),
            vision={"pixel_values": row["pixel_values"], "codes": row["codes"]},
            new_ids=adapter.new_tokens(row, None)[0].tolist(),
            answer=str(adapter.answer([sample], inputs)[0]),  # a SampleFailure shows in the diff
        )
    return observed


def original_side(built: Setup, variant: str, out: Path) -> dict[str, Observed]:
    """LWM's code run on every sample."""
    run_original(
        PYTHON,
        DRIVER,
        *("--code", str(CODE), "--model", str(built.original), "--samples", str(built.listed)),
        *("--max-new-tokens", str(MAX_NEW_TOKENS), "--out", str(out)),
        *(["--frames"] if variant == FRAMES else []),
    )
    codes = json.loads((out / "codes.json").read_text())
    observed = {}
    for o in original_outputs(out, built.samples):
        key = f"{o.sample.task}/{o.sample.sample_id}"
        observed[key] = Observed(
            sample=o.sample,
            text=o.text,
            input_ids=o.input_ids,
            vision={**o.vision, "codes": codes_tensor(codes[key])},
            new_ids=o.new_ids,
            answer=o.answer,
        )
    return observed


def codes_tensor(codes: list[list[int]]) -> object:
    import torch

    return torch.tensor(codes, dtype=torch.int64).reshape(len(codes), -1)


def test_kit_matches_original_code_live(
    built: Setup, variant: str, kit: dict[str, Observed], tmp_path: Path
) -> None:
    """Live: the original code on the same checkpoint and samples; re-records the reading's fixture when
    asked (``-k`` selects one reading: ``paper`` or ``video-frames``)."""
    require_original(
        PYTHON.is_file() and (CODE / "lwm" / "vision_chat.py").is_file(),
        "the live comparison needs LWM's environment (`bash .ci/lwm-official.sh`, or "
        f"{PYTHON_VAR}) and its code (`bash .ci/original-code.sh`, or MILEBENCH_LWM_CODE naming a "
        "checkout of github.com/LargeWorldModel/LWM); the golden comparison runs without",
    )
    original = original_side(built, variant, tmp_path)
    compare_live(family(variant), original, kit, meta(built, variant), PYTHON)


def test_kit_matches_golden_fixture(built: Setup, variant: str, kit: dict[str, Observed]) -> None:
    """Golden: every fixture task is covered, and the kit matches the recorded original field for field;
    in the video-frames reading a sample with more pictures than ``max_n_frames`` gives that many frames."""
    assert len(kit) == len(built.samples)
    assert_matches(family(variant), kit, meta(built, variant))
    frames = {k: observed.vision["codes"].shape[0] for k, observed in kit.items()}
    assert max(frames.values()) > 1, "some sample gives the model several pictures"
    if variant == FRAMES:
        kept = {f"{s.task}/{s.sample_id}": min(len(s.images), MAX_N_FRAMES) for s in built.samples}
        assert frames == kept
        assert any(len(s.images) > MAX_N_FRAMES for s in built.samples), "some sample's frames are picked"
