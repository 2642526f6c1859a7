"""Original-code parity for LLaMA-VID: its own video evaluation path (the ``llamavid`` package of
github.com/dvlab-research/LLaMA-VID, run in an environment of its era) and the kit's hf-llama-vid adapter
under llama-vid's paper execution give identical prompts, input ids, frame tensors, Q-Former ids,
generated ids and answers on every prepared sample of the mini-MileBench, both reading one tiny checkpoint
in LLaMA-VID's original layout, with the sample's pictures as the frames of one video.

The kit side always runs and is held to the golden fixture ``tests/golden/parity/llama-vid.json``, what
LLaMA-VID's code produced (``tests/parity_golden.py``). The live comparison needs LLaMA-VID's code (the
kit carries none of it): ``bash .ci/original-code.sh`` unpacks its ``llamavid`` package at the commit the
kit follows into ``.original-code/``, or ``MILEBENCH_LLAMA_VID_CODE`` names a checkout at that commit; and
its environment (``bash .ci/llama-vid-official.sh`` makes ``.venv-llama-vid``; ``MILEBENCH_LLAMA_VID_PYTHON``
names another). Without them only the live comparison skips; with them and ``MILEBENCH_RECORD_PARITY=1`` it
re-records the fixture (it runs first, so the golden comparison then reads the new one). Both sides run
float32 on the CPU. Twice: with the paper's stop keyword ``</s>`` and with ``T``, which stops many samples
early, so the stop rule is compared where it acts. Where the generated ids hold a run of byte tokens that
is not UTF-8, the slow SentencePiece decoder and the kit's differ in how many U+FFFD they write, so such an
answer is compared by its ids alone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from llava_official.parity import REPO, broken_byte_runs, run_original
from parity_golden import (
    Observed,
    Setup,
    assert_matches,
    compare_live,
    pinned_commit,
    require_original,
    set_up,
)
from tiny_checks import tiny_port

from milebench.benchmarks.milebench.records import PreparedSample
from milebench.infer.hf_llama_vid import HfLlamaVidAdapter
from milebench.infer.registry import load_adapter
from milebench.spec.model import ModelSpec

FAMILY = "llama-vid"
PYTHON_VAR = "MILEBENCH_LLAMA_VID_PYTHON"
PYTHON = Path(os.environ.get(PYTHON_VAR) or REPO / ".venv-llama-vid/bin/python")
CODE = Path(os.environ.get("MILEBENCH_LLAMA_VID_CODE") or REPO / ".original-code/LLaMA-VID")
DRIVER = Path(__file__).parents[1] / "llama_vid_official" / "official_llama_vid.py"
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 24
GEN_KWARGS = {"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": 1, "do_sample": False}
STOPS = (("</s>",), ("T",))
"""The paper's stop keyword, which a random model does not write, and ``T``, which the tiny model writes
often, so the stop rule is compared where it acts. (A keyword of more than one
id stops llava 1.1's criterion with an error: ``output_ids[0, -n:] == keyword_id`` has no truth value.)"""
NOT_COMPARED = "(decoded from a byte run that is not UTF-8: compared by its ids)"


def parity_spec(keywords: tuple[str, ...]) -> ModelSpec:
    model = tiny_port("llama-vid", "hf-llama-vid", "llama-vid", n_tokens=2)
    assert model.execution is not None
    return model.model_copy(
        update={
            "generation": model.generation.model_copy(update={"max_new_tokens": MAX_NEW_TOKENS}),
            "execution": model.execution.model_copy(update={"stop_strings": keywords}),
        }
    )


def key(keywords: tuple[str, ...], sample: PreparedSample) -> str:
    return f"stop {json.dumps(list(keywords))}/{sample.task}/{sample.sample_id}"


def for_transformers_4_31(original: Path) -> None:
    """The tokenizer's class by the name Vicuna's tokenizer_config gives it, which transformers 4.31's
    ``AutoTokenizer(use_fast=False)`` needs (the kit writes the one transformers 5 reads its files with)."""
    path = original / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**config, "tokenizer_class": "LlamaTokenizer"}), encoding="utf-8")


def answer_of(tokenizer: object, new_ids: list[int], answer: str) -> str:
    tokens = tokenizer.convert_ids_to_tokens(new_ids)  # type: ignore[attr-defined]
    return NOT_COMPARED if broken_byte_runs(tokens) else answer


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    return set_up(
        tmp_path_factory.mktemp("llamavidparity"),
        parity_spec(STOPS[0]),
        SAMPLES_PER_TASK,
        for_transformers_4_31,
        repository="github.com/dvlab-research/LLaMA-VID (llamavid/)",
        commit=pinned_commit("LLAMA_VID"),
        settings={"gen_kwargs": GEN_KWARGS, "stop_keywords": [list(k) for k in STOPS]},
    )


def loaded(built: Setup, keywords: tuple[str, ...]) -> HfLlamaVidAdapter:
    adapter = load_adapter(parity_spec(keywords), built.paths, built.paths.data_root)
    assert isinstance(adapter, HfLlamaVidAdapter)
    return adapter


@pytest.fixture(scope="module")
def adapter(built: Setup) -> HfLlamaVidAdapter:
    return loaded(built, STOPS[0])


@pytest.fixture(scope="module")
def kit(built: Setup) -> dict[str, Observed]:
    """The kit adapter's outputs on every sample, under each stop setting."""
    observed = {}
    for keywords in STOPS:
        observed |= kit_side(loaded(built, keywords), keywords, built)
    return observed


def kit_side(adapter: HfLlamaVidAdapter, keywords: tuple[str, ...], built: Setup) -> dict[str, Observed]:
    observed = {}
    for sample in built.samples:
        (row,) = adapter.split_rows(adapter.encode([sample]))
        new_ids = adapter.new_tokens(row, adapter.stopper(row))[0].tolist()
        answer = str(adapter.generate([sample])[0])  # a SampleFailure shows in the diff
        observed[key(keywords, sample)] = Observed(
            sample=sample,
            text=adapter.render(sample),
            input_ids=row["input_ids"][0].tolist(),
            vision={"pixel_values": row["pixel_values"], "qformer_input_ids": row["qformer_input_ids"]},
            new_ids=new_ids,
            answer=answer_of(adapter.processor.tokenizer, new_ids, answer),
        )
    return observed


def original_side(built: Setup, adapter: HfLlamaVidAdapter, out: Path) -> dict[str, Observed]:
    """LLaMA-VID's code run on every sample, under each stop setting."""
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
        observed |= original_run(built, adapter, keywords, folder)
    return observed


def original_run(
    built: Setup, adapter: HfLlamaVidAdapter, keywords: tuple[str, ...], out: Path
) -> dict[str, Observed]:
    results = {(r["task"], r["sample_id"]): r for r in json.loads((out / "results.json").read_text())}
    pixels, bert = torch.load(out / "pixels.pt"), torch.load(out / "qformer_input_ids.pt")
    observed = {}
    for sample in built.samples:
        name, row = f"{sample.task}/{sample.sample_id}", results[(sample.task, sample.sample_id)]
        observed[key(keywords, sample)] = Observed(
            sample=sample,
            text=row["prompt"],
            input_ids=row["input_ids"],
            vision={"pixel_values": pixels[name], "qformer_input_ids": bert[name]},
            new_ids=row["new_ids"],
            answer=answer_of(adapter.processor.tokenizer, row["new_ids"], row["answer"]),
        )
    return observed


def test_kit_matches_original_code_live(
    built: Setup, adapter: HfLlamaVidAdapter, kit: dict[str, Observed], tmp_path: Path
) -> None:
    require_original(
        PYTHON.is_file() and (CODE / "llamavid" / "model" / "llamavid_arch.py").is_file(),
        "the live comparison needs LLaMA-VID's environment (`bash .ci/llama-vid-official.sh`, or "
        f"{PYTHON_VAR}) and its code (`bash .ci/original-code.sh`, or MILEBENCH_LLAMA_VID_CODE naming a "
        "checkout of github.com/dvlab-research/LLaMA-VID); the golden comparison runs without",
    )
    compare_live(FAMILY, original_side(built, adapter, tmp_path), kit, built.meta, PYTHON)


def test_kit_matches_golden_fixture(built: Setup, kit: dict[str, Observed]) -> None:
    assert len(kit) == len(STOPS) * len(built.samples)
    assert_matches(FAMILY, kit, built.meta)
    spaced = [kit[key(STOPS[1], sample)] for sample in built.samples]
    assert min(len(o.new_ids) for o in spaced) < MAX_NEW_TOKENS, "the stop rule acted on some sample"
    frames = [kit[key].vision["pixel_values"].shape[0] for key in kit]
    assert max(frames) > 1, "some sample gives the model several frames"
