"""Original-code parity for Valley: its own inference path (``completion`` of the ``valley`` package of
github.com/RupertLuo/Valley, run in an environment of its era) and the kit's hf-valley adapter under
valley's paper execution give identical prompts, input ids, frame tensors, generated ids and answers on
every prepared sample of the mini-MileBench, both reading one tiny checkpoint in Valley's original
layout, with the sample's pictures as the frames of one video.

The kit side always runs and is held to the golden fixture ``tests/golden/parity/valley.json``, what
Valley's code produced (``tests/parity_golden.py``). The live comparison needs Valley's code (the kit
carries none of it): ``bash .ci/original-code.sh`` unpacks its ``valley`` package at the commit the kit
follows into ``.original-code/``, or ``MILEBENCH_VALLEY_CODE`` names a checkout at that commit; and its
environment (``bash .ci/valley-official.sh`` makes ``.venv-valley``; ``MILEBENCH_VALLEY_PYTHON`` names
another). Without them only the live comparison skips; with them and ``MILEBENCH_RECORD_PARITY=1`` it
re-records the fixture (it runs first, so the golden comparison then reads the new one). Both sides run
float32 on the CPU. Twice: with the paper's stop keyword ``###`` and with ``pen``, which stops many samples
early and at different places, so the stop rule is compared where it acts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from llava_official.parity import REPO, run_original
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
from milebench.infer.hf_valley import HfValleyAdapter
from milebench.infer.registry import load_adapter
from milebench.spec.model import ModelSpec

FAMILY = "valley"
PYTHON_VAR = "MILEBENCH_VALLEY_PYTHON"
PYTHON = Path(os.environ.get(PYTHON_VAR) or REPO / ".venv-valley/bin/python")
CODE = Path(os.environ.get("MILEBENCH_VALLEY_CODE") or REPO / ".original-code/Valley")
DRIVER = Path(__file__).parents[1] / "valley_official" / "official_valley.py"
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 24
GEN_KWARGS = {"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": 1, "do_sample": False}
STOPS = (("###",), ("pen",))
"""The paper's stop keyword, which a random model seldom writes, and ``pen``, which the tiny model writes
in many answers, so the stop rule is compared where it acts."""


def parity_spec(keywords: tuple[str, ...]) -> ModelSpec:
    model = tiny_port("valley", "hf-valley", "valley", n_tokens=1)
    assert model.execution is not None
    return model.model_copy(
        update={
            "generation": model.generation.model_copy(update={"max_new_tokens": MAX_NEW_TOKENS}),
            "execution": model.execution.model_copy(update={"stop_strings": keywords}),
        }
    )


def key(keywords: tuple[str, ...], sample: PreparedSample) -> str:
    return f"stop {json.dumps(list(keywords))}/{sample.task}/{sample.sample_id}"


def for_tokenizers_0_13(original: Path) -> None:
    """The tokenizer file as tokenizers 0.13 reads it (each merge one string, as the files of 2023 hold
    them) and its class by a name transformers 4.28 knows; the same tokenizer."""
    path = original / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    tokenizer["model"]["merges"] = [" ".join(pair) for pair in tokenizer["model"]["merges"]]
    path.write_text(json.dumps(tokenizer), encoding="utf-8")
    path = original / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**config, "tokenizer_class": "PreTrainedTokenizerFast"}), encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    return set_up(
        tmp_path_factory.mktemp("valleyparity"),
        parity_spec(STOPS[0]),
        SAMPLES_PER_TASK,
        for_tokenizers_0_13,
        repository="github.com/RupertLuo/Valley (valley/)",
        commit=pinned_commit("VALLEY"),
        settings={"gen_kwargs": GEN_KWARGS, "stop_keywords": [list(k) for k in STOPS]},
    )


@pytest.fixture(scope="module")
def kit(built: Setup) -> dict[str, Observed]:
    """The kit adapter's outputs on every sample, under each stop setting."""
    observed = {}
    for keywords in STOPS:
        adapter = load_adapter(parity_spec(keywords), built.paths, built.paths.data_root)
        assert isinstance(adapter, HfValleyAdapter)
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
    """Valley's code run on every sample, under each stop setting."""
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
        PYTHON.is_file() and (CODE / "valley" / "model" / "valley_model.py").is_file(),
        "the live comparison needs Valley's environment (`bash .ci/valley-official.sh`, or "
        f"{PYTHON_VAR}) and its code (`bash .ci/original-code.sh`, or MILEBENCH_VALLEY_CODE naming a "
        "checkout of github.com/RupertLuo/Valley); the golden comparison runs without",
    )
    compare_live(FAMILY, original_side(built, tmp_path), kit, built.meta, PYTHON)


def test_kit_matches_golden_fixture(built: Setup, kit: dict[str, Observed]) -> None:
    assert len(kit) == len(STOPS) * len(built.samples)
    assert_matches(FAMILY, kit, built.meta)
    stopped = [kit[key(STOPS[1], sample)] for sample in built.samples]
    assert min(len(o.new_ids) for o in stopped) < MAX_NEW_TOKENS, "the stop rule acted on some sample"
    frames = [observed.vision["pixel_values"].shape[0] for observed in kit.values()]
    assert max(frames) > 1, "some sample gives the model several frames"
