"""Original-code parity for Mantis: Mantis's own ``chat_mllava`` over its ``MLlavaProcessor`` and model class
(github.com/TIGER-AI-Lab/Mantis, run in the official LLaVA environment of its era) and the kit's hf-mantis
adapter under mantis's paper execution give identical texts, input ids, pixel tensors, generated ids and
answers on every prepared sample of the mini-MileBench, both reading one tiny checkpoint.

The kit side always runs and is held to the golden fixture ``tests/golden/parity/mantis.json``, what
Mantis's code produced (``tests/parity_golden.py``). The live comparison needs Mantis's code (the kit
carries none of it): ``bash .ci/original-code.sh`` unpacks its ``mantis`` package at the commit the kit
follows into ``.original-code/Mantis``, or ``MILEBENCH_MANTIS_CODE`` names a checkout at that commit (the
folder holding ``mantis/``); and the official environment (``bash .ci/llava-official.sh`` makes
``.venv-llava``; ``MILEBENCH_LLAVA_PYTHON`` names another). Without them only the live comparison skips;
with them and ``MILEBENCH_RECORD_PARITY=1`` it re-records the fixture (it runs first, so the golden
comparison then reads the new one). Both sides run float32 on the CPU. Transformers 4.37 keeps one image
id per picture where transformers 5 repeats it per feature, so the kit's ids are compared with each run of
image ids collapsed; the kit strips the answer, so the original's is compared stripped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from llava_official.parity import (
    OFFICIAL_IMAGE_ID,
    REPO,
    collapse_images,
    for_tokenizers_0_15,
    official_python,
    run_original,
)
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
from milebench.infer.hf_mantis import HfMantisAdapter
from milebench.infer.registry import load_adapter
from milebench.spec.model import ModelSpec

FAMILY = "mantis"
PYTHON = official_python()
CODE = Path(os.environ.get("MILEBENCH_MANTIS_CODE") or REPO / ".original-code/Mantis")
DRIVER = Path(__file__).parents[1] / "mantis_official" / "official_mantis.py"
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 24
GEN_KWARGS = {"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": 1, "do_sample": False}


def parity_spec() -> ModelSpec:
    model = tiny_port("mantis", "hf-mantis", "mantis")
    generation = model.generation.model_copy(update={"max_new_tokens": MAX_NEW_TOKENS})
    return model.model_copy(update={"generation": generation})


def for_mllava(folder: Path) -> None:
    """The original side's copy: tokenizer files for tokenizers 0.15, and no processor_config.json, whose
    arguments are the llava-hf processor's (``MLlavaProcessor`` takes none)."""
    for_tokenizers_0_15(folder)
    (folder / "processor_config.json").unlink()


def key(sample: PreparedSample) -> str:
    return f"{sample.task}/{sample.sample_id}"


def original_ids(ids: Sequence[int], image_id: int, per_image: int) -> list[int]:
    """The kit's ids as transformers 4.37 writes them: one image id per picture."""
    return [image_id if i == OFFICIAL_IMAGE_ID else i for i in collapse_images(ids, image_id, per_image)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    return set_up(
        tmp_path_factory.mktemp("mantisparity"),
        parity_spec(),
        SAMPLES_PER_TASK,
        for_mllava,
        repository="github.com/TIGER-AI-Lab/Mantis (mantis/)",
        commit=pinned_commit("MANTIS"),
        settings={"gen_kwargs": GEN_KWARGS},
    )


@pytest.fixture(scope="module")
def kit(built: Setup) -> dict[str, Observed]:
    """The kit adapter's outputs on every sample, ids in the original's form."""
    adapter = load_adapter(parity_spec(), built.paths, built.paths.data_root)
    assert isinstance(adapter, HfMantisAdapter)
    observed = {}
    for sample in built.samples:
        (row,) = adapter.split_rows(adapter.encode([sample]))
        observed[key(sample)] = Observed(
            sample=sample,
            text=adapter.render(sample),
            input_ids=original_ids(row["input_ids"][0].tolist(), adapter.image_token_id, adapter.image_seq),
            vision={"pixel_values": row["pixel_values"]},
            new_ids=adapter.new_tokens(row, adapter.stopper(row))[0].tolist(),
            answer=str(adapter.generate([sample])[0]),  # a SampleFailure shows in the diff
        )
    return observed


def original_side(built: Setup, out: Path) -> dict[str, Observed]:
    """Mantis's code run on every sample."""
    assert PYTHON is not None
    run_original(
        PYTHON,
        DRIVER,
        *("--code", str(CODE), "--model", str(built.original), "--samples", str(built.listed)),
        *("--gen-kwargs", json.dumps(GEN_KWARGS), "--out", str(out)),
    )
    return {key(o.sample): o for o in original_outputs(out, built.samples)}


def test_kit_matches_original_code_live(built: Setup, kit: dict[str, Observed], tmp_path: Path) -> None:
    require_original(
        PYTHON is not None and (CODE / "mantis" / "models" / "mllava" / "utils.py").is_file(),
        "the live comparison needs the official LLaVA environment (`bash .ci/llava-official.sh`, or "
        "MILEBENCH_LLAVA_PYTHON) and Mantis's code (`bash .ci/original-code.sh`, or MILEBENCH_MANTIS_CODE "
        "naming a github.com/TIGER-AI-Lab/Mantis checkout); the golden comparison runs without",
    )
    assert PYTHON is not None
    compare_live(FAMILY, original_side(built, tmp_path), kit, built.meta, PYTHON, answer_form=str.strip)


def test_kit_matches_golden_fixture(built: Setup, kit: dict[str, Observed]) -> None:
    assert len(kit) == len(built.samples)
    assert_matches(FAMILY, kit, built.meta, answer_form=str.strip)
