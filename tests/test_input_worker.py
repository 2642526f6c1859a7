"""Inputs built one batch ahead in a worker process: same answers as in line, failures kept per batch."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from mini_specs import builtin_model
from picture_samples import picture_sample
from PIL import Image
from tiny_checks import tiny_run, tiny_spec

from milebench.benchmarks.milebench.infer.random import RandomAdapter
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.prompt import Where, hash_images
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.image_files import MAX_IMAGE_PIXELS
from milebench.infer import prefetch
from milebench.infer.adapter import BuildsInputs, InferenceError
from milebench.infer.engine import run_model
from milebench.infer.prefetch import MIN_WORKER_BATCHES, InputFailure, prefetched
from milebench.infer.records import FailureKind, Prediction
from milebench.infer.registry import load_adapter
from milebench.infer.threads import split_threads
from milebench.io import read_jsonl
from milebench.spec.model import BatchRule, Generation, ModelSpec

ONE_PER_BATCH = BatchRule(batch_image=1)


class PidAdapter:
    """Encodes a batch as its ids and the building process's id; ``bad_ids`` cannot be built."""

    version = "pid-1"

    def __init__(self, bad_ids: Sequence[int] = (), kind: FailureKind | None = None) -> None:
        self.bad_ids = set(bad_ids)
        self.kind = kind

    def encode(self, samples: Sequence[PreparedSample]) -> dict[str, Any]:
        if self.bad_ids & {s.sample_id for s in samples}:
            if self.kind is not None:
                raise InferenceError(self.kind, "prompt too long")
            raise OSError("cannot identify image file 'WebQA/images/0.png'")
        return {"ids": [s.sample_id for s in samples], "pid": os.getpid()}

    def answer(self, samples: Sequence[PreparedSample], inputs: dict[str, Any]) -> list[str]:
        assert inputs["ids"] == [s.sample_id for s in samples]
        return [f"{s.sample_id} built by {inputs['pid']}" for s in samples]

    def generate(self, samples: Sequence[PreparedSample]) -> list[str]:
        return self.answer(samples, self.encode(samples))


def pid_spec() -> ModelSpec:
    return builtin_model("pid", batch={"batch_image": 1})


def predictions(path: Path) -> list[Prediction]:
    return [Prediction.model_validate(r) for r in read_jsonl(path)]


def builders(path: Path) -> set[int]:
    return {int(p.response.rsplit(" ", 1)[1]) for p in predictions(path) if p.response}


def test_job_threads_split_into_model_threads_and_one_input_worker() -> None:
    assert split_threads(None) == (None, 0)
    assert split_threads(1) == (1, 0)
    assert split_threads(2) == (1, 1)
    assert split_threads(4) == (3, 1)


def test_adapters_that_build_inputs_apart_are_recognised() -> None:
    assert isinstance(PidAdapter(), BuildsInputs)
    assert not isinstance(RandomAdapter(pid_spec(), RunPaths(Path("x"), Path("y")), Path("z")), BuildsInputs)


def test_a_worker_process_builds_the_inputs_of_a_long_job(tmp_path: Path) -> None:
    samples = [picture_sample(i, 1) for i in range(MIN_WORKER_BATCHES + 2)]
    summary = run_model(PidAdapter(), pid_spec(), samples, tmp_path / "w.jsonl", input_workers=1)
    assert (summary.generated, summary.failed) == (len(samples), 0)
    assert [p.sample_id for p in predictions(tmp_path / "w.jsonl")] == list(range(len(samples)))
    built_by = builders(tmp_path / "w.jsonl")
    assert len(built_by) == 1 and os.getpid() not in built_by

    run_model(PidAdapter(), pid_spec(), samples, tmp_path / "line.jsonl", input_workers=0)
    assert builders(tmp_path / "line.jsonl") == {os.getpid()}


def test_a_short_job_builds_in_line_even_with_a_worker_allotted(tmp_path: Path) -> None:
    samples = [picture_sample(i, 1) for i in range(MIN_WORKER_BATCHES - 1)]
    run_model(PidAdapter(), pid_spec(), samples, tmp_path / "p.jsonl", input_workers=1)
    assert builders(tmp_path / "p.jsonl") == {os.getpid()}


@pytest.mark.parametrize("workers", [0, 1])
def test_a_batch_whose_inputs_fail_is_recorded_and_the_job_goes_on(tmp_path: Path, workers: int) -> None:
    samples = [picture_sample(i, 1) for i in range(MIN_WORKER_BATCHES + 2)]
    adapter = PidAdapter(bad_ids=(3,))
    summary = run_model(adapter, pid_spec(), samples, tmp_path / "p.jsonl", input_workers=workers)
    assert (summary.failed, summary.failures) == (1, {"adapter_error": 1})
    failed = {p.sample_id: p for p in predictions(tmp_path / "p.jsonl") if p.failure}
    assert list(failed) == [3]
    assert failed[3].failure_detail == "OSError: cannot identify image file 'WebQA/images/0.png'"


def test_a_failure_kind_known_to_the_adapter_crosses_the_worker() -> None:
    batches = [[picture_sample(i, 1)] for i in range(MIN_WORKER_BATCHES)]
    adapter = PidAdapter(bad_ids=(2,), kind=FailureKind.CONTEXT_OVERFLOW)
    built = list(prefetched(batches, adapter.encode, 1))
    assert [batch for batch, _ in built] == batches
    assert built[2][1] == InputFailure(FailureKind.CONTEXT_OVERFLOW, "InferenceError: prompt too long")
    assert all(inputs["pid"] != os.getpid() for i, (_, inputs) in enumerate(built) if i != 2)


def test_tiny_llava_answers_the_same_with_an_input_worker(tmp_path: Path) -> None:
    spec = tiny_spec("tiny-llava", "hf-llava", "llava", 16).model_copy(update={"batch": ONE_PER_BATCH})
    paths = tiny_run(tmp_path, spec, [(40, 30), (32, 32), (20, 50)])
    adapter = load_adapter(spec, paths, paths.data_root)
    samples = [picture_sample(i, 1 + i % 3) for i in range(MIN_WORKER_BATCHES + 1)]
    run_model(adapter, spec, samples, tmp_path / "line.jsonl", input_workers=0)
    encode, pids = adapter.encode, tmp_path / "pids"

    def noting_pid(batch: Sequence[PreparedSample]) -> Any:
        with open(pids, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        return encode(batch)

    adapter.encode = noting_pid  # type: ignore[method-assign]
    run_model(adapter, spec, samples, tmp_path / "worker.jsonl", input_workers=1)
    assert os.getpid() not in {int(pid) for pid in pids.read_text().split()}

    def answers(path: Path) -> list[tuple[Any, ...]]:
        return [
            (p.sample_id, p.response, p.input_tokens, p.output_tokens, p.cache_key, p.failure)
            for p in predictions(path)
        ]

    in_line = answers(tmp_path / "line.jsonl")
    assert answers(tmp_path / "worker.jsonl") == in_line
    assert all(row[1] is not None and row[5] is None for row in in_line)


def test_without_fork_inputs_are_built_in_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefetch.multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    samples = [picture_sample(i, 1) for i in range(MIN_WORKER_BATCHES)]
    run_model(PidAdapter(), pid_spec(), samples, tmp_path / "p.jsonl", input_workers=1)
    assert builders(tmp_path / "p.jsonl") == {os.getpid()}


def truncated_jpeg(path: Path) -> None:
    """A JPEG cut in half: it opens, so preprocessing's image check passes, but it cannot be decoded."""
    whole = io.BytesIO()
    Image.effect_noise((64, 64), 60).convert("RGB").save(whole, "JPEG")
    path.write_bytes(whole.getvalue()[: len(whole.getvalue()) // 2])


THREE_PER_BATCH = tiny_spec("tiny-llava", "hf-llava", "llava", 16).model_copy(
    update={"batch": BatchRule(batch_image=3), "generation": Generation(max_new_tokens=1)}
)
BROKEN = "WebQA/images/broken.jpg"


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    """The tiny LLaVA, one picture and one JPEG cut in half."""
    paths = tiny_run(tmp_path_factory.mktemp("broken"), THREE_PER_BATCH, [(40, 30)])
    truncated_jpeg(paths.data_root / BROKEN)
    return paths


@pytest.mark.parametrize("workers", [0, 1])
def test_an_undecodable_image_fails_its_sample_and_its_batch_mates_are_answered(
    broken_run: RunPaths, tmp_path: Path, workers: int
) -> None:
    spec, paths, broken = THREE_PER_BATCH, broken_run, BROKEN
    # Preprocessing checks and hashes it without complaint: the file is exactly as prepared.
    digest = hash_images(
        paths.data_root, [broken], Where("WebQA", 4, tmp_path / "WebQA.json"), MAX_IMAGE_PIXELS
    )
    samples = [picture_sample(i, 1) for i in range(3 * MIN_WORKER_BATCHES)]
    samples[4] = samples[4].model_copy(update={"images": (broken,), "image_sha256": digest})
    adapter = load_adapter(spec, paths, paths.data_root)
    out = tmp_path / "p.jsonl"
    summary = run_model(adapter, spec, samples, out, input_workers=workers)

    assert (summary.failed, summary.failures) == (1, {"adapter_error": 1})
    by_id = {p.sample_id: p for p in predictions(out)}
    failed = by_id.pop(4)
    assert failed.failure is FailureKind.ADAPTER_ERROR and failed.failure_detail is not None
    assert "sample 4" in failed.failure_detail and broken in failed.failure_detail
    assert all(p.failure is None and p.response is not None for p in by_id.values())
    assert (by_id[3].batch_size, by_id[5].batch_size, by_id[0].batch_size) == (2, 2, 3)
