"""Original-code parity for VILA: VILA's own inference path (the llava package of
github.com/Efficient-Large-Model/VILA, run in its own environment of the era) and the kit's hf-vila adapter
under vila's paper execution give identical prompts, input ids, pixel tensors, generated ids and answers
on every prepared sample of the mini-MileBench, both reading one tiny checkpoint in VILA's original layout.
Twice: with the paper's stop keyword ``</s>`` (the end of sequence, which also stops generation), and with
a space, which stops most samples early, so the stop rule is compared where it acts. And once more with
the checkpoint's ``tokenizer_model_max_length`` lowered to CUT on both sides, below the expanded length of
a third of the samples (and above every sample's prompt ids, one per picture, as in a real run, whose
prompts are truncated to the window), so VILA's embedding cut is compared where it acts
(``tests/golden/parity/vila-cut.json``).

The kit side always runs and is held to the golden fixture ``tests/golden/parity/vila.json``, what VILA's
code produced (``tests/parity_golden.py``). The live comparison needs VILA's code (the kit carries none
of it): ``bash .ci/original-code.sh`` unpacks its ``llava`` package at the commit the kit follows into
``.original-code/VILA``, or ``MILEBENCH_VILA_CODE`` names a checkout at that commit; and its environment
(``bash .ci/vila-official.sh`` makes ``.venv-vila``; ``MILEBENCH_VILA_PYTHON`` names another). Without them
only the live comparison skips; with them and ``MILEBENCH_RECORD_PARITY=1`` it re-records the fixture (it
runs first, so the golden comparison then reads the new one). Both sides run float32 on the CPU.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from llava_official.parity import REPO, for_tokenizers_0_15, run_original
from parity_golden import (
    Observed,
    Setup,
    assert_matches,
    checkpoint_sha256,
    compare_live,
    original_outputs,
    pinned_commit,
    require_original,
    set_up,
)
from tiny_checks import tiny_port

from milebench.benchmarks.milebench.records import PreparedSample
from milebench.infer.hf_vila import HfVilaAdapter
from milebench.infer.registry import load_adapter
from milebench.spec.model import ModelSpec

FAMILY = "vila"
NAMED_PYTHON = os.environ.get("MILEBENCH_VILA_PYTHON")
PYTHON = Path(NAMED_PYTHON) if NAMED_PYTHON else REPO / ".venv-vila/bin/python"
CODE = Path(os.environ.get("MILEBENCH_VILA_CODE") or REPO / ".original-code/VILA")
DRIVER = Path(__file__).parents[1] / "vila_official" / "official_vila.py"
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 24
STOPS = (("</s>",), (" ",))
GEN_KWARGS = {"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": 1, "do_sample": False}
CUT = 768
"""``tokenizer_model_max_length`` of the cut check."""
CUT_STOPS = (STOPS[0],)
CUT_MAX_NEW_TOKENS = 8
CUT_GEN_KWARGS = {**GEN_KWARGS, "max_new_tokens": CUT_MAX_NEW_TOKENS}


def parity_spec(keywords: tuple[str, ...], max_new_tokens: int = MAX_NEW_TOKENS) -> ModelSpec:
    model = tiny_port("vila", "hf-vila", "vila")
    assert model.execution is not None
    return model.model_copy(
        update={
            "generation": model.generation.model_copy(update={"max_new_tokens": max_new_tokens}),
            "execution": model.execution.model_copy(update={"stop_strings": keywords}),
        }
    )


def key(keywords: tuple[str, ...], sample: PreparedSample) -> str:
    return f"stop {json.dumps(list(keywords))}/{sample.task}/{sample.sample_id}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    return set_up(
        tmp_path_factory.mktemp("vilaparity"),
        parity_spec(STOPS[0]),
        SAMPLES_PER_TASK,
        for_tokenizers_0_15,
        repository="github.com/Efficient-Large-Model/VILA (llava/)",
        commit=pinned_commit("VILA"),
        settings={"gen_kwargs": GEN_KWARGS, "stop_keywords": [list(k) for k in STOPS]},
    )


@pytest.fixture(scope="module")
def built_cut(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    """The tiny checkpoint with ``tokenizer_model_max_length`` CUT, on both sides."""
    setup = set_up(
        tmp_path_factory.mktemp("vilacut"),
        parity_spec(CUT_STOPS[0], CUT_MAX_NEW_TOKENS),
        SAMPLES_PER_TASK,
        for_tokenizers_0_15,
        repository="github.com/Efficient-Large-Model/VILA (llava/)",
        commit=pinned_commit("VILA"),
        settings={"gen_kwargs": CUT_GEN_KWARGS, "stop_keywords": [list(k) for k in CUT_STOPS]},
    )
    kit_folder = setup.paths.model_dir(parity_spec(CUT_STOPS[0]).name)
    for folder in (kit_folder, setup.original):
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "tokenizer_model_max_length": CUT}))
    return replace(
        setup, meta=setup.meta.model_copy(update={"checkpoint_sha256": checkpoint_sha256(kit_folder)})
    )


def kit_side(built: Setup, stops: tuple[tuple[str, ...], ...], max_new_tokens: int) -> dict[str, Observed]:
    """The kit adapter's outputs on every sample, under each stop setting."""
    observed = {}
    for keywords in stops:
        adapter = load_adapter(parity_spec(keywords, max_new_tokens), built.paths, built.paths.data_root)
        assert isinstance(adapter, HfVilaAdapter)
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


@pytest.fixture(scope="module")
def kit(built: Setup) -> dict[str, Observed]:
    return kit_side(built, STOPS, MAX_NEW_TOKENS)


@pytest.fixture(scope="module")
def kit_cut(built_cut: Setup) -> dict[str, Observed]:
    return kit_side(built_cut, CUT_STOPS, CUT_MAX_NEW_TOKENS)


def original_side(
    built: Setup, out: Path, stops: tuple[tuple[str, ...], ...], gen_kwargs: dict[str, object]
) -> dict[str, Observed]:
    """VILA's code run on every sample, under each stop setting."""
    observed: dict[str, Observed] = {}
    for n, keywords in enumerate(stops):
        folder = out / str(n)
        folder.mkdir()
        run_original(
            PYTHON,
            DRIVER,
            *("--code", str(CODE), "--model", str(built.original), "--samples", str(built.listed)),
            *("--gen-kwargs", json.dumps(gen_kwargs), "--keywords", json.dumps(list(keywords))),
            *("--out", str(folder)),
        )
        observed |= {key(keywords, o.sample): o for o in original_outputs(folder, built.samples)}
    return observed


def require_vila() -> None:
    require_original(
        PYTHON.is_file() and (CODE / "llava" / "mm_utils.py").is_file(),
        "the live comparison needs VILA's environment (`bash .ci/vila-official.sh`, or "
        "MILEBENCH_VILA_PYTHON) and VILA's code (`bash .ci/original-code.sh`, or MILEBENCH_VILA_CODE naming "
        "a github.com/Efficient-Large-Model/VILA checkout); the golden comparison runs without",
    )


def test_kit_matches_original_code_live(built: Setup, kit: dict[str, Observed], tmp_path: Path) -> None:
    require_vila()
    compare_live(FAMILY, original_side(built, tmp_path, STOPS, GEN_KWARGS), kit, built.meta, PYTHON)


def test_kit_matches_golden_fixture(built: Setup, kit: dict[str, Observed]) -> None:
    assert len(kit) == len(STOPS) * len(built.samples)
    assert_matches(FAMILY, kit, built.meta)
    spaced = [len(kit[key(STOPS[1], sample)].new_ids) for sample in built.samples]
    assert min(spaced) < MAX_NEW_TOKENS, "the stop rule acted on some sample"


def test_cut_kit_matches_original_code_live(
    built_cut: Setup, kit_cut: dict[str, Observed], tmp_path: Path
) -> None:
    require_vila()
    original = original_side(built_cut, tmp_path, CUT_STOPS, CUT_GEN_KWARGS)
    compare_live(f"{FAMILY}-cut", original, kit_cut, built_cut.meta, PYTHON)


def test_cut_kit_matches_golden_fixture(built_cut: Setup, kit_cut: dict[str, Observed]) -> None:
    assert_matches(f"{FAMILY}-cut", kit_cut, built_cut.meta)
    per_picture = parity_spec(CUT_STOPS[0]).n_tokens_per_image
    assert per_picture is not None
    positions = [
        len(o.input_ids) + (per_picture - 1) * list(o.input_ids).count(-200) for o in kit_cut.values()
    ]
    assert max(len(o.input_ids) for o in kit_cut.values()) < CUT < max(positions), "the cut acts"
