"""Original-code parity for Yi-VL: Yi's own inference path (the ``VL/`` folder of github.com/01-ai/Yi, run in
the official LLaVA environment of its era) and the kit's hf-yi-vl adapter under yi-vl's paper execution
give identical prompts, input ids, pixel tensors, generated ids and answers on every prepared sample of
the mini-MileBench, both reading one tiny checkpoint in Yi-VL's original layout.

Needs Yi's code (the kit carries none of it): ``bash .ci/original-code.sh`` unpacks its ``VL`` folder at
the commit the kit follows into ``.original-code/``, or ``MILEBENCH_YI_VL_CODE`` names one; and the
official environment (``bash .ci/llava-official.sh`` makes ``.venv-llava``;
``MILEBENCH_LLAVA_PYTHON`` names another). Both sides run float32 on the CPU. Twice: with the paper's stop
keyword ``###``, which a random model does not write, and with a space, which stops most samples early,
so Yi's stop rule is compared where it acts.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from llava_official.parity import REPO, for_tokenizers_0_15, listed_fixture, official_python, run_original
from tiny_checks import tiny_port

from milebench.infer.hf_yi_vl import HfYiVLAdapter
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.paths import RunPaths
from milebench.records import PreparedSample
from milebench.spec.model import ModelSpec

PYTHON = official_python()
CODE = Path(os.environ.get("MILEBENCH_YI_VL_CODE") or REPO / ".original-code/Yi/VL")
DRIVER = Path(__file__).parent / "yi_vl_official" / "official_yi.py"
pytestmark = pytest.mark.skipif(
    PYTHON is None or not (CODE / "llava" / "mm_utils.py").is_file(),
    reason="needs the official LLaVA environment (`bash .ci/llava-official.sh`, or MILEBENCH_LLAVA_PYTHON) "
    "and Yi-VL's code (`bash .ci/original-code.sh`, or MILEBENCH_YI_VL_CODE naming the VL folder of a "
    "github.com/01-ai/Yi checkout)",
)
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 24


def parity_spec(keywords: tuple[str, ...]) -> ModelSpec:
    model = tiny_port("yi-vl", "hf-yi-vl", "yi-vl")
    assert model.execution is not None
    return model.model_copy(
        update={
            "generation": model.generation.model_copy(update={"max_new_tokens": MAX_NEW_TOKENS}),
            "execution": model.execution.model_copy(update={"stop_strings": keywords}),
        }
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunPaths, list[PreparedSample], Path, Path]:
    """The tiny checkpoint, the original side's copy of it, the prepared samples and their list."""
    root = tmp_path_factory.mktemp("yiparity")
    spec = parity_spec(("###",))
    paths = RunPaths(out=root / "out", reports=root / "reports")
    build_tiny(spec, paths.model_dir(spec.name))
    original = root / "original"
    shutil.copytree(paths.model_dir(spec.name), original)
    for_tokenizers_0_15(original)
    samples = listed_fixture(spec, paths, SAMPLES_PER_TASK, root / "samples.json")
    return paths, samples, original, root / "samples.json"


@pytest.mark.parametrize("keywords", [("###",), (" ",)])
def test_identical_prompts_ids_pixels_generated_ids_and_answers(
    built: tuple[RunPaths, list[PreparedSample], Path, Path], keywords: tuple[str, ...], tmp_path: Path
) -> None:
    paths, samples, original, listed = built
    gen_kwargs = {"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": 1, "do_sample": False}
    assert PYTHON is not None
    run_original(
        PYTHON,
        DRIVER,
        *("--code", str(CODE), "--model", str(original), "--samples", str(listed)),
        *(
            "--gen-kwargs",
            json.dumps(gen_kwargs),
            "--keywords",
            json.dumps(list(keywords)),
            "--out",
            str(tmp_path),
        ),
    )
    results = {(r["task"], r["sample_id"]): r for r in json.loads((tmp_path / "results.json").read_text())}
    pixels = torch.load(tmp_path / "pixels.pt")
    adapter = load_adapter(parity_spec(keywords), paths, paths.data_root)
    assert isinstance(adapter, HfYiVLAdapter)
    assert len(results) == len(samples) == 29 * SAMPLES_PER_TASK
    lengths = []
    for sample in samples:
        key = (sample.task, sample.sample_id)
        want = results[key]
        (row,) = adapter.split_rows(adapter.encode([sample]))
        assert adapter.render(sample) == want["prompt"], key
        assert row["input_ids"][0].tolist() == want["input_ids"], key
        assert torch.equal(row["pixel_values"], pixels[f"{sample.task}/{sample.sample_id}"]), key
        new = adapter.new_tokens(row, adapter.stopper(row))[0].tolist()
        assert new == want["new_ids"], key
        assert adapter.generate([sample]) == [want["answer"]], key
        lengths.append(len(new))
    if keywords == (" ",):
        assert min(lengths) < MAX_NEW_TOKENS, "the stop rule acted on some sample"
