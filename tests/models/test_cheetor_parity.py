"""Original-code parity for Cheetor: its own benchmark path (the ``cheetah`` package of
github.com/DCDmllm/Cheetah in an environment of its era, ``Chat.batch_answer``) and the kit's hf-cheetor
adapter under cheetor's paper execution give identical texts, input ids (each piece's ids, one image id
between pieces), pixel tensors, ViT features (what VPG-C reads), the pictures' places, input embeddings
(the Q-Former's outputs in place), generated ids (after VPG-C) and answers on a sample of every
mini-MileBench task, both reading one tiny checkpoint in the original's layout.

The kit side always runs and is held to the golden fixture ``tests/golden/parity/cheetor.json``, what
Cheetah's code produced (``tests/parity_golden.py``). The live comparison needs that code (the kit carries
none of it): ``bash .ci/original-code.sh`` unpacks ``Cheetah/cheetah/`` and ``Cheetah/eval_configs/`` at the
commit the kit follows into ``.original-code/Cheetah``, or ``MILEBENCH_CHEETOR_CODE`` names such a folder;
and its environment (``bash .ci/cheetor-official.sh`` makes ``.venv-cheetor``; ``MILEBENCH_CHEETOR_PYTHON``
names another). Without them only the live comparison skips; with them and ``MILEBENCH_RECORD_PARITY=1``
it re-records the fixture. Both sides run float32 on the CPU.

Two forms are mapped before comparing: transformers 4.31 starts the output of an embeddings-only
``generate`` with a BOS it never fed the model (dropped, as ``batch_answer`` drops it), and where the
generated ids hold a run of byte tokens that is not UTF-8 the slow SentencePiece decoder and the kit's
decode it differently, so such an answer is compared by its ids and, in its place, the decoding of the
same ids without byte tokens with ``<s>`` and ``</s>`` put in (the driver's ``probe``), which holds the kit's
decoding (a space before a special token after text, the cut at ``</s>``) to the slow tokenizer's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from llava_official.parity import BYTE_TOKEN, REPO, broken_byte_runs, run_original
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
from transformers import BatchFeature

from milebench.benchmarks.milebench.records import PreparedSample
from milebench.infer.hf_cheetor import HfCheetorAdapter, QFormerLlamaAdapter
from milebench.infer.registry import load_adapter
from milebench.spec.model import ModelSpec

FAMILY = "cheetor"
PYTHON = Path(os.environ.get("MILEBENCH_CHEETOR_PYTHON") or REPO / ".venv-cheetor/bin/python")
CODE = Path(os.environ.get("MILEBENCH_CHEETOR_CODE") or REPO / ".original-code/Cheetah")
DRIVER = Path(__file__).parents[1] / "cheetor_official" / "official_cheetor.py"
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 16
NOT_COMPARED = "(decoded from a byte run that is not UTF-8: compared by its ids)"


def parity_spec() -> ModelSpec:
    model = tiny_port("cheetor", "hf-cheetor", "cheetor")
    return model.model_copy(
        update={"generation": model.generation.model_copy(update={"max_new_tokens": MAX_NEW_TOKENS})}
    )


def key(sample: PreparedSample) -> str:
    return f"{sample.task}/{sample.sample_id}"


def probe_ids(tokenizer: Any, new_ids: list[int]) -> list[int]:
    """The generated ids without byte tokens, special tokens put in, as the driver's ``probe`` has them."""
    plain = [i for i in new_ids if not BYTE_TOKEN.fullmatch(tokenizer.convert_ids_to_tokens(i))]
    return [*plain, tokenizer.bos_token_id, *plain[:4], tokenizer.eos_token_id, *plain[:2]]


def answer_of(tokenizer: Any, new_ids: list[int], answer: str, probe: str) -> str:
    """The answer; where its bytes are not text, the decoding of the probe ids in its place."""
    tokens = tokenizer.convert_ids_to_tokens(new_ids)
    return f"{NOT_COMPARED}; probe: {probe!r}" if broken_byte_runs(tokens) else answer


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    return set_up(
        tmp_path_factory.mktemp("cheetorparity"),
        parity_spec(),
        SAMPLES_PER_TASK,
        lambda folder: None,
        "github.com/DCDmllm/Cheetah (Cheetah/cheetah/, Cheetah/eval_configs/)",
        pinned_commit("CHEETAH"),
        {"max_new_tokens": MAX_NEW_TOKENS},
    )


@pytest.fixture(scope="module")
def adapter(built: Setup) -> HfCheetorAdapter:
    loaded = load_adapter(parity_spec(), built.paths, built.paths.data_root)
    assert isinstance(loaded, HfCheetorAdapter)
    return loaded


@pytest.fixture(scope="module")
def kit(built: Setup, adapter: HfCheetorAdapter) -> dict[str, Observed]:
    """The kit adapter's outputs on every sample: what it feeds the model and what it generates."""
    observed = {}
    for sample in built.samples:
        (row,) = adapter.split_rows(adapter.encode([sample]))
        with torch.inference_mode():
            given = adapter.generate_inputs(row)
        vpg = adapter.cheetor.pending
        assert vpg is not None
        vision = {
            "vit_features": torch.cat(vpg.features),
            "image_spans": torch.tensor(vpg.spans, dtype=torch.long).reshape(-1, 2),
        }
        observed[key(sample)] = kit_observed(adapter, sample, row, given, vision)
    return observed


def kit_observed(
    adapter: QFormerLlamaAdapter[Any],
    sample: PreparedSample,
    row: BatchFeature,
    given: dict[str, Any],
    vision: dict[str, torch.Tensor],
) -> Observed:
    """What the adapter feeds the model for ``row`` (its ``generate_inputs`` already ``given``) and what
    it generates, the answer as ``decode_rows`` makes it from these ids (generating again would give the
    same ids)."""
    new_tokens = adapter.new_tokens(row, adapter.stopper(row))
    (answer,) = [adapter.clean(text) for text in adapter.decoded(new_tokens)]
    new_ids = new_tokens[0].tolist()
    tokenizer = adapter.processor.tokenizer
    probe = torch.tensor([probe_ids(tokenizer, new_ids)])
    return Observed(
        sample=sample,
        text=adapter.render(sample),
        input_ids=row["input_ids"][0].tolist(),
        vision={"pixel_values": row["pixel_values"], "inputs_embeds": given["inputs_embeds"], **vision},
        new_ids=new_ids,
        answer=answer_of(tokenizer, new_ids, answer, adapter.clean(adapter.decoded(probe)[0])),
    )


def kit_outputs(adapter: QFormerLlamaAdapter[Any], samples: Sequence[PreparedSample]) -> dict[str, Observed]:
    """What a Q-Former adapter with no tensors beyond its embeddings feeds the model for each sample and
    what it generates."""
    observed = {}
    for sample in samples:
        (row,) = adapter.split_rows(adapter.encode([sample]))
        with torch.inference_mode():
            given = adapter.generate_inputs(row)
        observed[key(sample)] = kit_observed(adapter, sample, row, given, {})
    return observed


def original_side(built: Setup, adapter: HfCheetorAdapter, out: Path) -> dict[str, Observed]:
    """Cheetah's code run on every sample, in the kit's form (the placeholder BOS dropped)."""
    run_original(
        PYTHON,
        DRIVER,
        *("--code", str(CODE), "--model", str(built.original)),
        *("--samples", str(built.listed), "--max-new-tokens", str(MAX_NEW_TOKENS), "--out", str(out)),
    )
    return driver_observed(built, adapter.processor.tokenizer, out)


def driver_observed(built: Setup, tokenizer: Any, out: Path) -> dict[str, Observed]:
    """What a Q-Former model's original-code driver wrote in ``out`` (``results.json``: text, input_ids,
    new_ids, answer, probe, or the ``failure`` that stopped the sample; ``tensors.pt``: ``task/sample_id``
    -> its tensors), in the kit's form: the BOS that starts an embeddings-only ``generate``'s output
    dropped, the answer mapped by ``answer_of``; a failed sample has no text, ids or answer but its error."""
    results = {f"{r['task']}/{r['sample_id']}": r for r in json.loads((out / "results.json").read_text())}
    tensors = torch.load(out / "tensors.pt")
    observed = {}
    for sample in built.samples:
        got, vision = results[key(sample)], tensors[key(sample)]
        if "failure" in got:
            observed[key(sample)] = Observed(sample, "", [], vision, [], got["failure"])
            continue
        bos, *new_ids = got["new_ids"]
        assert bos == tokenizer.bos_token_id, key(sample)
        observed[key(sample)] = Observed(
            sample=sample,
            text=got["text"],
            input_ids=got["input_ids"],
            vision={**vision, "inputs_embeds": vision["inputs_embeds"][None]},
            new_ids=new_ids,
            answer=answer_of(tokenizer, new_ids, got["answer"], got["probe"]),
        )
    return observed


def test_original_code_gives_what_the_kit_gives(
    built: Setup, adapter: HfCheetorAdapter, kit: dict[str, Observed], tmp_path: Path
) -> None:
    """Live: the original code on the same checkpoint and samples; re-records the fixture when asked."""
    require_original(
        PYTHON.is_file() and (CODE / "cheetah" / "models" / "cheetah_llama2.py").is_file(),
        "needs Cheetah's code (`bash .ci/original-code.sh`, or MILEBENCH_CHEETOR_CODE) and its environment "
        "(`bash .ci/cheetor-official.sh`, or MILEBENCH_CHEETOR_PYTHON)",
    )
    compare_live(FAMILY, original_side(built, adapter, tmp_path), kit, built.meta, PYTHON)


def test_kit_gives_what_the_original_code_gave(built: Setup, kit: dict[str, Observed]) -> None:
    """Golden: every fixture task is covered, and the kit matches the recorded original field for field."""
    assert {s.task for s in built.samples} == {k.split("/")[0] for k in kit}
    assert_matches(FAMILY, kit, built.meta)
