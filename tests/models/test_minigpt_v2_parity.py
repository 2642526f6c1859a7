"""Original-code parity for MiniGPT-v2: its own inference path (the ``minigpt4`` package of
github.com/Vision-CAIR/MiniGPT-4 in an environment of its era) and the kit's hf-minigpt-v2 adapter under
minigpt-v2's paper execution give identical texts, input ids (each piece's ids, one image id between
pieces), pixel tensors, input embeddings (the pictures' features in place), generated ids and answers on a
sample of every mini-MileBench task, both reading one tiny checkpoint in the original's layout.

The kit side always runs and is held to the golden fixture ``tests/golden/parity/minigpt-v2.json``, what
MiniGPT-4's code produced (``tests/parity_golden.py``). The live comparison needs that code (the kit
carries none of it): ``bash .ci/original-code.sh`` unpacks ``minigpt4/`` and ``eval_configs/`` at the
commit the kit follows into ``.original-code/MiniGPT-4``, or ``MILEBENCH_MINIGPT_V2_CODE`` names such a
folder; and its environment (``bash .ci/minigpt-v2-official.sh`` makes ``.venv-minigpt-v2``;
``MILEBENCH_MINIGPT_V2_PYTHON`` names another). Without them only the live comparison skips; with them and
``MILEBENCH_RECORD_PARITY=1`` it re-records the fixture. Both sides run float32 on the CPU.

Two forms are mapped before comparing: transformers 4.30 starts the output of an embeddings-only
``generate`` with a BOS it never fed the model (dropped), and where the generated ids hold a run of
byte tokens that is not UTF-8 the slow SentencePiece decoder and the kit's differ in how many U+FFFD they
write, so such an answer is compared by its ids alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from llava_official.parity import REPO, broken_byte_runs, listed_fixture, run_original
from parity_golden import (
    RECORD_VAR,
    Meta,
    Observed,
    assert_matches,
    assert_same,
    checkpoint_sha256,
    golden_of,
    pinned_commit,
    record,
    recording,
)
from tiny_checks import tiny_port

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.infer.hf_minigpt_v2 import HfMiniGPTv2Adapter
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.spec.model import ModelSpec

FAMILY = "minigpt-v2"
PYTHON = Path(os.environ.get("MILEBENCH_MINIGPT_V2_PYTHON") or REPO / ".venv-minigpt-v2/bin/python")
CODE = Path(os.environ.get("MILEBENCH_MINIGPT_V2_CODE") or REPO / ".original-code/MiniGPT-4")
DRIVER = Path(__file__).parents[1] / "minigpt_v2_official" / "official_minigpt_v2.py"
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 16
NOT_COMPARED = "(decoded from a byte run that is not UTF-8: compared by its ids)"


def parity_spec() -> ModelSpec:
    model = tiny_port("minigpt-v2", "hf-minigpt-v2", "minigpt-v2")
    return model.model_copy(
        update={"generation": model.generation.model_copy(update={"max_new_tokens": MAX_NEW_TOKENS})}
    )


def key(sample: PreparedSample) -> str:
    return f"{sample.task}/{sample.sample_id}"


def answer_of(tokenizer: object, new_ids: list[int], answer: str) -> str:
    tokens = tokenizer.convert_ids_to_tokens(new_ids)  # type: ignore[attr-defined]
    return NOT_COMPARED if broken_byte_runs(tokens) else answer


@dataclass(frozen=True)
class Built:
    paths: RunPaths
    samples: list[PreparedSample]
    listed: Path
    meta: Meta


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("minigptparity")
    spec = parity_spec()
    paths = RunPaths(out=root / "out", reports=root / "reports")
    build_tiny(spec, paths.model_dir(spec.name))
    samples = listed_fixture(spec, paths, SAMPLES_PER_TASK, root / "samples.json")
    meta = Meta(
        repository="github.com/Vision-CAIR/MiniGPT-4 (minigpt4/, eval_configs/)",
        commit=pinned_commit("MINIGPT"),
        checkpoint_sha256=checkpoint_sha256(paths.model_dir(spec.name)),
        settings={"samples_per_task": SAMPLES_PER_TASK, "max_new_tokens": MAX_NEW_TOKENS},
    )
    return Built(paths, samples, root / "samples.json", meta)


@pytest.fixture(scope="module")
def adapter(built: Built) -> HfMiniGPTv2Adapter:
    loaded = load_adapter(parity_spec(), built.paths, built.paths.data_root)
    assert isinstance(loaded, HfMiniGPTv2Adapter)
    return loaded


@pytest.fixture(scope="module")
def kit(built: Built, adapter: HfMiniGPTv2Adapter) -> dict[str, Observed]:
    """The kit adapter's outputs on every sample: what it feeds the model and what it generates."""
    observed = {}
    for sample in built.samples:
        (row,) = adapter.split_rows(adapter.encode([sample]))
        with torch.inference_mode():
            embeds = adapter.generate_inputs(row)["inputs_embeds"][0]
        new_ids = adapter.new_tokens(row, adapter.stopper(row))[0].tolist()
        observed[key(sample)] = Observed(
            sample=sample,
            text=adapter.render(sample),
            input_ids=row["input_ids"][0].tolist(),
            vision={"pixel_values": row["pixel_values"], "inputs_embeds": embeds[None]},
            new_ids=new_ids,
            answer=answer_of(adapter.processor.tokenizer, new_ids, adapter.generate([sample])[0]),
        )
    return observed


def original_side(built: Built, adapter: HfMiniGPTv2Adapter, out: Path) -> dict[str, Observed]:
    """MiniGPT-4's code run on every sample, in the kit's form (the placeholder BOS dropped)."""
    run_original(
        PYTHON,
        DRIVER,
        *("--code", str(CODE), "--model", str(built.paths.model_dir(parity_spec().name))),
        *("--samples", str(built.listed), "--max-new-tokens", str(MAX_NEW_TOKENS), "--out", str(out)),
    )
    results = {f"{r['task']}/{r['sample_id']}": r for r in json.loads((out / "results.json").read_text())}
    pixels, embeds = torch.load(out / "pixels.pt"), torch.load(out / "embeds.pt")
    observed = {}
    for sample in built.samples:
        got = results[key(sample)]
        bos, *new_ids = got["new_ids"]
        assert bos == adapter.processor.tokenizer.bos_token_id, key(sample)
        observed[key(sample)] = Observed(
            sample=sample,
            text=got["text"],
            input_ids=got["input_ids"],
            vision={"pixel_values": pixels[key(sample)], "inputs_embeds": embeds[key(sample)][None]},
            new_ids=new_ids,
            answer=answer_of(adapter.processor.tokenizer, new_ids, got["answer"]),
        )
    return observed


def test_original_code_gives_what_the_kit_gives(
    built: Built, adapter: HfMiniGPTv2Adapter, kit: dict[str, Observed], tmp_path: Path
) -> None:
    """Live: the original code on the same checkpoint and samples; re-records the fixture when asked."""
    if not (PYTHON.is_file() and (CODE / "minigpt4" / "models" / "minigpt_v2.py").is_file()):
        missing = (
            "needs MiniGPT-4's code (`bash .ci/original-code.sh`, or MILEBENCH_MINIGPT_V2_CODE) and its "
            "environment (`bash .ci/minigpt-v2-official.sh`, or MILEBENCH_MINIGPT_V2_PYTHON)"
        )
        if recording():
            pytest.fail(f"{RECORD_VAR}=1, but the live comparison cannot run: {missing}")
        pytest.skip(missing)
    original = original_side(built, adapter, tmp_path)
    if recording():
        record(FAMILY, original, built.meta, PYTHON)
    assert_same(golden_of(FAMILY, original, built.meta, PYTHON), kit, built.meta)


def test_kit_gives_what_the_original_code_gave(built: Built, kit: dict[str, Observed]) -> None:
    """Golden: every fixture task is covered, and the kit matches the recorded original field for field."""
    assert {s.task for s in built.samples} == {k.split("/")[0] for k in kit}
    assert_matches(FAMILY, kit, built.meta)
