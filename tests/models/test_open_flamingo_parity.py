"""Original-code parity for OpenFlamingo: the README's generation steps run by the ``open-flamingo`` 2.0.1
package in an environment of its era, and the kit's open-flamingo adapter under open-flamingo's paper
execution and its ``chunked`` variant, give identical texts, input ids, vision tensors (``vision_x``),
generated ids and answers on every prepared sample of the mini-MileBench, both reading one tiny checkpoint.

What the original code produced is kept in ``tests/golden/parity/open-flamingo-<variant>.json``
(``parity_golden``), so the comparison runs where the original environment is absent. Where it is present
(``bash .ci/open-flamingo-official.sh`` makes ``.venv-openflamingo``; ``MILEBENCH_OPEN_FLAMINGO_PYTHON``
names another interpreter) the original code runs live, the kit is compared with it, and
``MILEBENCH_RECORD_PARITY=1`` records the fixtures from that run. Both sides run float32 on the CPU. The
kit side needs the original package beside the kit (``bash .ci/open-flamingo-kit.sh``): the adapter
drives it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

import parity_golden
import pytest
import torch
from llava_official.parity import REPO, listed_fixture, run_original
from parity_golden import Meta, Observed
from tiny_checks import tiny_port

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.infer.hf_open_flamingo import OpenFlamingoAdapter
from milebench.infer.open_flamingo_model import LAYOUT_FILE, FlamingoLayout
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.spec.model import ModelSpec

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("open_flamingo") is None,
    reason="the kit's open-flamingo adapter drives the original package: `bash .ci/open-flamingo-kit.sh`",
)
NAMED = os.environ.get("MILEBENCH_OPEN_FLAMINGO_PYTHON")
PYTHON = Path(NAMED) if NAMED else REPO / ".venv-openflamingo/bin/python"
DRIVER = Path(__file__).parents[1] / "open_flamingo_official" / "official_open_flamingo.py"
REPOSITORY = "mlfoundations/open_flamingo"
RELEASE = "914076ee07d0235943f1556e9aaf2fb974337f0e"
"""The commit of the 2.0.1 tag, the PyPI release both environments install."""
SAMPLES_PER_TASK = 1
MAX_NEW_TOKENS = 12
GEN_KWARGS = {"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": 1, "do_sample": False}
VARIANTS = ("paper", "chunked")


def parity_spec(variant: str) -> ModelSpec:
    model = tiny_port("open-flamingo", "open-flamingo", "open-flamingo", n_tokens=1)
    assert model.execution is not None
    return model.model_copy(
        update={
            "generation": model.generation.model_copy(update={"max_new_tokens": MAX_NEW_TOKENS}),
            "execution": model.execution.with_variant(variant),
        }
    )


def family(variant: str) -> str:
    return f"open-flamingo-{variant}"


def key(sample: PreparedSample) -> str:
    return f"{sample.task}/{sample.sample_id}"


def original(
    model: Path, layout: FlamingoLayout, samples: list[PreparedSample], listed: Path, variant: str, out: Path
) -> dict[str, Observed]:
    """What the original code gives on each sample, run live in its own environment."""
    out.mkdir()
    config = layout.open_clip_config
    run_original(
        PYTHON,
        DRIVER,
        *("--model", str(model), "--clip", layout.clip_vision_encoder_path, "--samples", str(listed)),
        *(["--open-clip-config", str(model / config)] if config else []),
        *("--cross-attn-every-n-layers", str(layout.cross_attn_every_n_layers)),
        *("--gen-kwargs", json.dumps(GEN_KWARGS), "--out", str(out)),
        *(["--chunked"] if variant == "chunked" else []),
    )
    results = {f"{r['task']}/{r['sample_id']}": r for r in json.loads((out / "results.json").read_text())}
    vision = torch.load(out / "vision.pt")
    return {
        key(s): Observed(
            sample=s,
            text=results[key(s)]["prompt"],
            input_ids=results[key(s)]["input_ids"],
            vision={"vision_x": vision[key(s)]},
            new_ids=results[key(s)]["new_ids"],
            answer=results[key(s)]["answer"],
        )
        for s in samples
    }


def kit_side(
    adapter: OpenFlamingoAdapter, sample: PreparedSample, monkeypatch: pytest.MonkeyPatch
) -> Observed:
    """What the kit's adapter builds and answers; the generated ids are read off its own generate call."""
    (row,) = adapter.split_rows(adapter.encode([sample]))
    outputs: list[torch.Tensor] = []
    real = adapter.model.generate

    def seen(**kwargs: Any) -> torch.Tensor:
        output: torch.Tensor = real(**kwargs)
        outputs.append(output[:, kwargs["lang_x"].shape[1] :])
        return output

    monkeypatch.setattr(adapter.model, "generate", seen)
    (answer,) = adapter.generate([sample])
    monkeypatch.undo()
    assert isinstance(answer, str) and len(outputs) == 1
    return Observed(
        sample=sample,
        text=adapter.render(sample),
        input_ids=row["input_ids"][0].tolist(),
        vision={"vision_x": adapter.generate_inputs(row)["vision_x"]},
        new_ids=outputs[0][0].tolist(),
        answer=answer,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunPaths, list[PreparedSample], Path]:
    """The tiny checkpoint, the prepared samples of every task, and the root of both."""
    root = tmp_path_factory.mktemp("flamingoparity")
    spec = parity_spec("paper")
    paths = RunPaths(out=root / "out", reports=root / "reports")
    build_tiny(spec, paths.model_dir(spec.name))
    samples = listed_fixture(spec, paths, SAMPLES_PER_TASK, root / "samples.json")
    return paths, samples, root


@pytest.mark.parametrize("variant", VARIANTS)
def test_identical_texts_ids_vision_tensors_generated_ids_and_answers(
    built: tuple[RunPaths, list[PreparedSample], Path], variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, samples, root = built
    spec = parity_spec(variant)
    folder = paths.model_dir(spec.name)
    meta = Meta(
        repository=REPOSITORY,
        commit=RELEASE,
        checkpoint_sha256=parity_golden.checkpoint_sha256(folder),
        settings={"gen_kwargs": GEN_KWARGS, "variant": variant, "samples_per_task": SAMPLES_PER_TASK},
    )
    adapter = load_adapter(spec, paths, paths.data_root)
    assert isinstance(adapter, OpenFlamingoAdapter)
    assert len(samples) == 29 * SAMPLES_PER_TASK
    kit = {key(s): kit_side(adapter, s, monkeypatch) for s in samples}
    assert all(len(o.vision["vision_x"].shape) == 6 for o in kit.values())  # (B, T_img, F, C, H, W)
    if PYTHON.is_file():
        copy = root / f"original-{variant}"
        shutil.copytree(folder, copy)
        layout = FlamingoLayout.model_validate_json((folder / LAYOUT_FILE).read_text())
        live = original(copy, layout, samples, root / "samples.json", variant, root / f"out-{variant}")
        if parity_golden.recording():
            parity_golden.record(family(variant), live, meta, PYTHON)
        parity_golden.assert_same(parity_golden.golden_of(family(variant), live, meta, PYTHON), kit, meta)
    parity_golden.assert_matches(family(variant), kit, meta)
