"""Original-code parity for Mantis: Mantis's own ``chat_mllava`` over its ``MLlavaProcessor`` and model class
(github.com/TIGER-AI-Lab/Mantis, run in the official LLaVA environment of its era) and the kit's hf-mantis
adapter under mantis's paper execution give identical texts, input ids, pixel tensors, generated ids and
answers on every prepared sample of the mini-MileBench, both reading one tiny checkpoint.

Needs Mantis's code (the kit carries none of it): ``bash .ci/original-code.sh`` unpacks its ``mantis``
package at the commit the kit follows into ``.original-code/Mantis``, or ``MILEBENCH_MANTIS_CODE`` names
a checkout (the folder holding ``mantis/``); and the official environment (``bash .ci/llava-official.sh``
makes ``.venv-llava``; ``MILEBENCH_LLAVA_PYTHON`` names another). Both sides run float32 on the CPU.
Transformers 4.37 keeps one image id per picture where transformers 5 repeats it per feature, so the
kit's ids are compared with each run of image ids collapsed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from llava_official.parity import (
    OFFICIAL_IMAGE_ID,
    REPO,
    collapse_images,
    for_tokenizers_0_15,
    listed_fixture,
    official_python,
    run_original,
)
from tiny_checks import tiny_port

from milebench.infer.hf_mantis import HfMantisAdapter
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.paths import RunPaths
from milebench.records import PreparedSample
from milebench.spec.model import ModelSpec

PYTHON = official_python()
CODE = Path(os.environ.get("MILEBENCH_MANTIS_CODE") or REPO / ".original-code/Mantis")
DRIVER = Path(__file__).parent / "mantis_official" / "official_mantis.py"
pytestmark = pytest.mark.skipif(
    PYTHON is None or not (CODE / "mantis" / "models" / "mllava" / "utils.py").is_file(),
    reason="needs the official LLaVA environment (`bash .ci/llava-official.sh`, or MILEBENCH_LLAVA_PYTHON) "
    "and Mantis's code (`bash .ci/original-code.sh`, or MILEBENCH_MANTIS_CODE naming a "
    "github.com/TIGER-AI-Lab/Mantis checkout)",
)
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 24


def parity_spec() -> ModelSpec:
    model = tiny_port("mantis", "hf-mantis", "mantis")
    generation = model.generation.model_copy(update={"max_new_tokens": MAX_NEW_TOKENS})
    return model.model_copy(update={"generation": generation})


def for_mllava(folder: Path) -> None:
    """The original side's copy: tokenizer files for tokenizers 0.15, and no processor_config.json, whose
    arguments are the llava-hf processor's (``MLlavaProcessor`` takes none)."""
    for_tokenizers_0_15(folder)
    (folder / "processor_config.json").unlink()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[HfMantisAdapter, list[PreparedSample], Path]:
    root = tmp_path_factory.mktemp("mantisparity")
    spec = parity_spec()
    paths = RunPaths(out=root / "out", reports=root / "reports")
    build_tiny(spec, paths.model_dir(spec.name))
    original = root / "original"
    shutil.copytree(paths.model_dir(spec.name), original)
    for_mllava(original)
    samples = listed_fixture(spec, paths, SAMPLES_PER_TASK, root / "samples.json")
    gen_kwargs = {"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": 1, "do_sample": False}
    assert PYTHON is not None
    run_original(
        PYTHON,
        DRIVER,
        *("--code", str(CODE), "--model", str(original), "--samples", str(root / "samples.json")),
        *("--gen-kwargs", json.dumps(gen_kwargs), "--out", str(root)),
    )
    adapter = load_adapter(spec, paths, paths.data_root)
    assert isinstance(adapter, HfMantisAdapter)
    return adapter, samples, root


def test_identical_texts_ids_pixels_generated_ids_and_answers(
    setup: tuple[HfMantisAdapter, list[PreparedSample], Path],
) -> None:
    adapter, samples, root = setup
    results = {(r["task"], r["sample_id"]): r for r in json.loads((root / "results.json").read_text())}
    pixels = torch.load(root / "pixels.pt")
    assert len(results) == len(samples) == 29 * SAMPLES_PER_TASK
    image_id = adapter.image_token_id
    for sample in samples:
        key = (sample.task, sample.sample_id)
        want = results[key]
        (row,) = adapter.split_rows(adapter.encode([sample]))
        assert adapter.render(sample) == want["prompt"], key
        ids = collapse_images(row["input_ids"][0].tolist(), image_id, adapter.image_seq)
        assert ids == [OFFICIAL_IMAGE_ID if i == image_id else i for i in want["input_ids"]], key
        assert torch.equal(row["pixel_values"], pixels[f"{sample.task}/{sample.sample_id}"]), key
        assert adapter.new_tokens(row, adapter.stopper(row))[0].tolist() == want["new_ids"], key
        assert adapter.generate([sample]) == [want["answer"].strip()], key
