"""Checks every tiny transformers family shares: seeded weights, a test checkpoint with pictures, and the
whole mini-MileBench answered through the engine."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from parity_golden import checkpoint_sha256
from picture_samples import write_pictures

from milebench.benchmarks.milebench.fixture.prepared import prepared_fixture
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import regime_for
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.infer.engine import run_model
from milebench.infer.records import Prediction
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.io import read_jsonl
from milebench.spec.model import ModelSpec


def tiny_spec(name: str, adapter: str, family: str, n_tokens: int, seed: int = 0) -> ModelSpec:
    """A kit-section spec of a tiny checkpoint: 2,048 tokens of context, 8 new tokens."""
    return ModelSpec.model_validate(
        {
            "name": name,
            "display_name": name,
            "section": "kit",
            "adapter": adapter,
            "weights": {"kind": "tiny", "family": family, "seed": seed},
            "max_context_len": 2048,
            "n_tokens_per_image": n_tokens,
            "generation": {"max_new_tokens": 8},
        }
    )


def weights_hash(folder: Path, model_class: Any) -> str:
    """Hash of every tensor of the checkpoint, as ``model_class.from_pretrained`` loads it."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model_class.from_pretrained(folder).state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def tensor_sha256(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's shape and float32 bytes (the original-code drivers hash the same way)."""
    digest = hashlib.sha256(json.dumps(list(tensor.shape)).encode())
    digest.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def state_dict_sha256(path: Path) -> str:
    """sha256 over the names and tensors of a saved state dict (``torch.save``), in name order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(torch.load(path, map_location="cpu").items()):
        digest.update(name.encode())
        digest.update(tensor_sha256(tensor).encode())
    return digest.hexdigest()


def same_seed_same_weights(
    spec: Callable[[int], ModelSpec], folder: Path, scratch: Path, model_class: Any
) -> None:
    """Rebuilding ``folder``'s checkpoint with seed 0 gives the same tensors; seed 1 gives others."""
    build_tiny(spec(0), scratch / "again")
    build_tiny(spec(1), scratch / "other")
    reference = weights_hash(folder, model_class)
    assert weights_hash(scratch / "again", model_class) == reference
    assert weights_hash(scratch / "other", model_class) != reference


def same_seed_same_checkpoint(spec: Callable[[int], ModelSpec], root: Path) -> Path:
    """Building with seed 0 twice gives the same files, with seed 1 others; returns the seed-0 folder."""
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        build_tiny(spec(seed), root / name)
    assert checkpoint_sha256(root / "a") == checkpoint_sha256(root / "b")
    assert checkpoint_sha256(root / "a") != checkpoint_sha256(root / "c")
    return root / "a"


def tiny_run(root: Path, spec: ModelSpec, sizes: Sequence[tuple[int, int]]) -> RunPaths:
    """A run layout in ``root`` holding the spec's tiny checkpoint and pictures of ``sizes``."""
    paths = RunPaths(out=root, reports=root / "reports")
    build_tiny(spec, paths.model_dir(spec.name))
    write_pictures(paths, sizes)
    return paths


def answers_every_fixture_task(
    model: ModelSpec, root: Path, refused: Callable[[PreparedSample], bool] = lambda sample: False
) -> list[Prediction]:
    """Every task of the mini-MileBench, prepared for the model's own regime, answered without failures
    but for the samples ``refused`` names; returns every prediction."""
    specs = load_specs()
    paths = RunPaths(out=root / "out", reports=root / "reports")
    build_tiny(model, paths.model_dir(model.name))
    run = RunSpec(name="t", description="t", models=(model.name,), data=FixtureSource(kind="fixture"))
    regime = regime_for(model, run, Mode.MULTI_IMAGE, specs.root)
    tasks = prepared_fixture(paths, list(specs.tasks.values()), 1, regime=regime)
    adapter = load_adapter(model, paths, paths.data_root)
    assert len(tasks) == 29
    every = []
    for task, samples in tasks.items():
        out = root / "predictions" / f"{task}.jsonl"
        summary = run_model(adapter, model, samples, out)
        assert (summary.total, summary.failed) == (len(samples), sum(map(refused, samples))), task
        predictions = [Prediction.model_validate(r) for r in read_jsonl(out)]
        assert [p.sample_id for p in predictions] == [s.sample_id for s in samples]
        answered = [p for p, s in zip(predictions, samples, strict=True) if not refused(s)]
        assert all(p.response is not None and p.input_tokens for p in answered), task
        every += predictions
    return every


def tiny_port(paper_model: str, adapter: str, family: str, n_tokens: int = 16, seed: int = 0) -> ModelSpec:
    """``tiny-<paper_model>``: the family's tiny checkpoint run with the paper model's own execution."""
    execution = load_specs().models[paper_model].execution
    assert execution is not None
    spec = tiny_spec(f"tiny-{paper_model}", adapter, family, n_tokens, seed)
    return spec.model_copy(update={"execution": execution})
