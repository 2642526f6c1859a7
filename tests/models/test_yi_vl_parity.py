"""Original-code parity for Yi-VL: Yi's own inference path (the ``VL/`` folder of github.com/01-ai/Yi, run in
the official LLaVA environment of its era) and the kit's hf-yi-vl adapter under yi-vl's paper execution
give identical prompts, input ids, pixel tensors, generated ids and answers on every prepared sample of
the mini-MileBench, both reading one tiny checkpoint in Yi-VL's original layout. Twice: with the paper's
stop keyword ``###``, which a random model does not write, and with a space, which stops most samples
early, so Yi's stop rule is compared where it acts.

The kit side always runs and is held to the golden fixture ``tests/golden/parity/yi-vl.json``, what Yi's
code produced (``tests/parity_golden.py``). The live comparison needs Yi's code (the kit carries none of
it): ``bash .ci/original-code.sh`` unpacks its ``VL`` folder at the commit the kit follows into
``.original-code/``, or ``MILEBENCH_YI_VL_CODE`` names one at that commit; and the official environment
(``bash .ci/llava-official.sh`` makes ``.venv-llava``; ``MILEBENCH_LLAVA_PYTHON`` names another). Without
them only the live comparison skips; with them and ``MILEBENCH_RECORD_PARITY=1`` it re-records the fixture
(it runs first, so the golden comparison then reads the new one). Both sides run float32 on the CPU.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from llava_official.parity import REPO, for_tokenizers_0_15, official_python, run_original
from parity_golden import (
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

from milebench.benchmarks.milebench.records import PreparedSample
from milebench.infer.hf_yi_vl import HfYiVLAdapter
from milebench.infer.registry import load_adapter
from milebench.spec.model import ModelSpec

FAMILY = "yi-vl"
PYTHON = official_python()
CODE = Path(os.environ.get("MILEBENCH_YI_VL_CODE") or REPO / ".original-code/Yi/VL")
DRIVER = Path(__file__).parents[1] / "yi_vl_official" / "official_yi.py"
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 24
STOPS = (("###",), (" ",))
GEN_KWARGS = {"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": 1, "do_sample": False}


def parity_spec(keywords: tuple[str, ...]) -> ModelSpec:
    model = tiny_port("yi-vl", "hf-yi-vl", "yi-vl")
    assert model.execution is not None
    return model.model_copy(
        update={
            "generation": model.generation.model_copy(update={"max_new_tokens": MAX_NEW_TOKENS}),
            "execution": model.execution.model_copy(update={"stop_strings": keywords}),
        }
    )


def key(keywords: tuple[str, ...], sample: PreparedSample) -> str:
    return f"stop {json.dumps(list(keywords))}/{sample.task}/{sample.sample_id}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    return set_up(
        tmp_path_factory.mktemp("yiparity"),
        parity_spec(STOPS[0]),
        SAMPLES_PER_TASK,
        for_tokenizers_0_15,
        repository="github.com/01-ai/Yi (VL/)",
        commit=pinned_commit("YI"),
        settings={"gen_kwargs": GEN_KWARGS, "stop_keywords": [list(k) for k in STOPS]},
    )


@pytest.fixture(scope="module")
def kit(built: Setup) -> dict[str, Observed]:
    """The kit adapter's outputs on every sample, under each stop setting."""
    observed = {}
    for keywords in STOPS:
        adapter = load_adapter(parity_spec(keywords), built.paths, built.paths.data_root)
        assert isinstance(adapter, HfYiVLAdapter)
        for sample in built.samples:
            (row,) = adapter.split_rows(adapter.encode([sample]))
            observed[key(keywords, sample)] = Observed(
                sample=sample,
                text=adapter.render(sample),
                input_ids=row["input_ids"][0].tolist(),
                vision={"pixel_values": row["pixel_values"]},
                new_ids=adapter.new_tokens(row, adapter.stopper(row))[0].tolist(),
                answer=str(adapter.generate([sample])[0]),  # a SampleFailure shows in the diff
            )
    return observed


def original_side(built: Setup, out: Path) -> dict[str, Observed]:
    """Yi's code run on every sample, under each stop setting."""
    assert PYTHON is not None
    observed: dict[str, Observed] = {}
    for n, keywords in enumerate(STOPS):
        folder = out / str(n)
        folder.mkdir()
        run_original(
            PYTHON,
            DRIVER,
            *("--code", str(CODE), "--model", str(built.original), "--samples", str(built.listed)),
            *("--gen-kwargs", json.dumps(GEN_KWARGS), "--keywords", json.dumps(list(keywords))),
            *("--out", str(folder)),
        )
        observed |= {key(keywords, o.sample): o for o in original_outputs(folder, built.samples)}
    return observed


def test_kit_matches_original_code_live(built: Setup, kit: dict[str, Observed], tmp_path: Path) -> None:
    require_original(
        PYTHON is not None and (CODE / "llava" / "mm_utils.py").is_file(),
        "the live comparison needs the official LLaVA environment (`bash .ci/llava-official.sh`, or "
        "MILEBENCH_LLAVA_PYTHON) and Yi-VL's code (`bash .ci/original-code.sh`, or MILEBENCH_YI_VL_CODE "
        "naming the VL folder of a github.com/01-ai/Yi checkout); the golden comparison runs without",
    )
    assert PYTHON is not None
    compare_live(FAMILY, original_side(built, tmp_path), kit, built.meta, PYTHON)


def test_kit_matches_golden_fixture(built: Setup, kit: dict[str, Observed]) -> None:
    assert len(kit) == len(STOPS) * len(built.samples)
    assert_matches(FAMILY, kit, built.meta)
    spaced = [len(kit[key(STOPS[1], sample)].new_ids) for sample in built.samples]
    assert min(spaced) < MAX_NEW_TOKENS, "the stop rule acted on some sample"
