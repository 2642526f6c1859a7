"""Official-execution parity: the official MileBench LLaVA path, run by the ``llava`` package in its own
environment, and the kit's hf-llava adapter under llava-1.5-7b's paper execution give identical input
ids, pixel tensors and generated ids on every prepared sample of the mini-MileBench.

Both sides read one tiny checkpoint: the original-format LLaVA-1.5 built offline by the official stack,
and its llava-hf conversion for the kit. Both run float32 on the CPU (the official builder's float16
model is cast; the GPU dtype and autocast are the execution spec's and cannot run here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from llava_official.parity import (
    broken_byte_runs,
    build_original,
    collapse_images,
    convert_to_hf,
    official,
    official_python,
)

from milebench.benchmarks.milebench.fixture.prepared import prepared_fixture
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import UNLIMITED, regime_for
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.infer.hf_llava import HfLlavaAdapter
from milebench.infer.registry import load_adapter
from milebench.spec.model import ModelSpec

PYTHON = official_python()
pytestmark = pytest.mark.skipif(
    PYTHON is None,
    reason="no official LLaVA environment: `bash .ci/llava-official.sh` installs llava-torch with "
    "transformers 4.37 into .venv-llava (or set MILEBENCH_LLAVA_PYTHON)",
)
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 24


def parity_spec() -> ModelSpec:
    """A tiny model run with llava-1.5-7b's own paper execution."""
    execution = load_specs().models["llava-1.5-7b"].execution
    return ModelSpec.model_validate(
        {
            "name": "llava-parity",
            "display_name": "LLaVA parity",
            "section": "kit",
            "adapter": "hf-llava",
            "weights": {"kind": "tiny", "family": "llava"},
            "max_context_len": 1024,
            "n_tokens_per_image": 16,
            "generation": {"max_new_tokens": MAX_NEW_TOKENS},
            "execution": execution.model_dump(mode="json"),
        }
    )


def fixture_prompts(root: Path) -> list[str]:
    """Every whole prompt of the mini-MileBench and the template text: the tokenizer's training text."""
    paths = RunPaths(out=root, reports=root / "reports")
    tasks = prepared_fixture(paths, list(load_specs().tasks.values()), SAMPLES_PER_TASK, regime=UNLIMITED)
    system = "[INST] <<SYS>>\nYou are a helpful language and vision assistant.\n<</SYS>>\n\n [/INST]"
    return [system] + [s.prompt for samples in tasks.values() for s in samples]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[HfLlavaAdapter, list[PreparedSample], Path]:
    root = tmp_path_factory.mktemp("parity")
    assert PYTHON is not None
    build_original(PYTHON, root / "built", fixture_prompts(root / "corpus"))
    spec = parity_spec()
    paths = RunPaths(out=root / "out", reports=root / "reports")
    convert_to_hf(root / "built", paths.model_dir(spec.name))
    run = RunSpec(name="t", description="t", models=(spec.name,), data=FixtureSource(kind="fixture"))
    regime = regime_for(spec, run, Mode.MULTI_IMAGE, load_specs().root)
    tasks = prepared_fixture(paths, list(load_specs().tasks.values()), SAMPLES_PER_TASK, regime=regime)
    samples = [s for task in tasks.values() for s in task]
    listed = [
        {
            "task": s.task,
            "sample_id": s.sample_id,
            "prompt": s.prompt,
            "images": [str(paths.data_root / rel) for rel in s.images],
        }
        for s in samples
    ]
    (root / "samples.json").write_text(json.dumps(listed))
    gen_kwargs = {
        "max_new_tokens": MAX_NEW_TOKENS,
        "min_new_tokens": 1,
        "do_sample": False,
        "temperature": 0.0,
    }
    official(
        PYTHON,
        "run",
        "--model",
        str(root / "built/llava-v1.5-tiny"),
        "--samples",
        str(root / "samples.json"),
        "--gen-kwargs",
        json.dumps(gen_kwargs),
        "--float32",
        "--out",
        str(root),
    )
    adapter = load_adapter(spec, paths, paths.data_root)
    assert isinstance(adapter, HfLlavaAdapter)
    return adapter, samples, root


def test_identical_ids_pixels_and_generated_tokens(
    setup: tuple[HfLlavaAdapter, list[PreparedSample], Path],
) -> None:
    adapter, samples, root = setup
    results = {(r["task"], r["sample_id"]): r for r in json.loads((root / "results.json").read_text())}
    pixels = torch.load(root / "pixels.pt")
    assert len(results) == len(samples) == 29 * SAMPLES_PER_TASK
    for sample in samples:
        key = (sample.task, sample.sample_id)
        want = results[key]
        (row,) = adapter.split_rows(adapter.encode([sample]))
        assert adapter.render(sample) == want["prompt"], key
        ids = row["input_ids"][0].tolist()
        assert collapse_images(ids, adapter.image_token_id, adapter.image_seq) == want["input_ids"], key
        assert torch.equal(row["pixel_values"], pixels[f"{sample.task}/{sample.sample_id}"]), key
        new = adapter.new_tokens(row, adapter.stopper(row))[0].tolist()
        # transformers 4.37, generating from embeddings, puts BOS where the prompt ids would be
        assert [adapter.model.generation_config.bos_token_id, *new] == want["output_ids"], key


def test_identical_answers_unless_bytes_do_not_decode(
    setup: tuple[HfLlavaAdapter, list[PreparedSample], Path],
) -> None:
    """Answers are the same text, except where the generated byte-fallback tokens do not form UTF-8:
    the official slow SentencePiece decode keeps the valid bytes of such a run, the fast tokenizer's
    decoder turns every byte of it into U+FFFD. A trained model rarely emits such runs; this random one
    often does."""
    adapter, samples, root = setup
    results = {(r["task"], r["sample_id"]): r for r in json.loads((root / "results.json").read_text())}
    tokenizer = adapter.processor.tokenizer
    same = 0
    for sample in samples:
        want = results[(sample.task, sample.sample_id)]
        (answer,) = adapter.generate([sample])
        if answer == want["answer"]:
            same += 1
        else:
            assert broken_byte_runs(tokenizer.convert_ids_to_tokens(want["output_ids"])), sample.sample_id
    assert same, "no answer to compare"
