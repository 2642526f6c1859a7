"""Inference engine: cache keys, resume after a kill, failures, official batching, baselines."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from mini_specs import builtin_model as model
from mini_specs import task_spec
from PIL import Image

from milebench.benchmarks.milebench.infer import commands
from milebench.benchmarks.milebench.infer.cell import failure_verdict
from milebench.benchmarks.milebench.infer.oracle import OracleAdapter
from milebench.benchmarks.milebench.infer.random import RandomAdapter
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess import commands as preprocess_commands
from milebench.benchmarks.milebench.records import PreparedSample, option_label, read_prepared
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import Group, QuestionType, ScorerKind
from milebench.infer import engine, registry
from milebench.infer.adapter import Adapter, AdapterError, SampleFailure, TokenUsage
from milebench.infer.engine import InferSummary, cache_key, plan_batches, run_model
from milebench.infer.records import FailureKind, Prediction, WindowExcess
from milebench.infer.registry import load_adapter
from milebench.infer.threads import THREAD_VARIABLES
from milebench.infer.time_limit import cut_by_time_limit
from milebench.io import read_jsonl
from milebench.record_files import RecordError
from milebench.spec.model import BatchRule, Generation
from milebench.spec.policy import ContextOverflow, RunPolicy, run_policy
from milebench.spec.weights_lock import pin_weights

PATHS = RunPaths(out=Path("unused"), reports=Path("unused"))


def prepared(
    sample_id: int,
    task: str = "WebQA",
    choices: tuple[str, ...] | None = ("cat", "dog", "cow", "pig"),
    labelled: bool = True,
    n_images: int = 1,
) -> PreparedSample:
    return PreparedSample(
        task=task,
        mode=Mode.MULTI_IMAGE,
        sample_id=sample_id,
        instruction="Answer.",
        context=f"<ImageHere>question {sample_id}",
        images=tuple(f"{task}/images/{sample_id}_{i}.png" for i in range(n_images)),
        image_sha256=tuple(f"{sample_id:064x}" for _ in range(n_images)),
        prompt_sha256=f"{sample_id:064x}",
        question_type=QuestionType.MULTI_CHOICE if choices else QuestionType.OPEN_ENDED,
        choices=choices,
        labelled_choices=labelled,
        response=choices[1] if choices else "gold text",
        image_quantity_level="Few",
        n_images=n_images,
    )


class CountingAdapter:
    """Answers ``"answer <id>"``; raises ``interrupt_after`` samples in, like a killed job would stop."""

    version = "test-1"

    def __init__(self, interrupt_after: int | None = None, fail_ids: Sequence[int] = (), oom: bool = False):
        self.seen: list[int] = []
        self.interrupt_after = interrupt_after
        self.fail_ids = set(fail_ids)
        self.oom = oom
        self.batch_size = 0

    def generate(self, samples: Sequence[PreparedSample]) -> list[str]:
        if self.interrupt_after is not None and len(self.seen) >= self.interrupt_after:
            raise KeyboardInterrupt
        if self.fail_ids & {s.sample_id for s in samples}:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory") if self.oom else ValueError("bad sample")
        self.seen += [s.sample_id for s in samples]
        self.batch_size = len(samples)
        return [f"answer {s.sample_id}" for s in samples]

    def last_usage(self) -> list[TokenUsage]:
        return [TokenUsage(10, 2)] * self.batch_size


def records(path: Path) -> list[Prediction]:
    return [Prediction.model_validate(r) for r in read_jsonl(path)]


ONE_PER_BATCH = BatchRule(batch_image=1)


def test_resume_after_kill_generates_only_the_rest(tmp_path: Path) -> None:
    spec = model(batch=ONE_PER_BATCH)
    samples = [prepared(i) for i in range(5)]
    out = tmp_path / "pred.jsonl"

    first = CountingAdapter(interrupt_after=2)
    with pytest.raises(KeyboardInterrupt):
        run_model(first, spec, samples, out)
    assert first.seen == [0, 1]
    assert [r.sample_id for r in records(out)] == [0, 1]

    second = CountingAdapter()
    summary = run_model(second, spec, samples, out)
    assert second.seen == [2, 3, 4]
    assert (summary.reused, summary.generated, summary.failed) == (2, 3, 0)
    saved = records(out)
    assert [r.sample_id for r in saved] == [0, 1, 2, 3, 4]
    assert [r.response for r in saved] == [f"answer {i}" for i in range(5)]
    assert all(r.cache_key == cache_key(spec, s, "test-1") for r, s in zip(saved, samples, strict=True))
    assert all(r.failure is None for r in saved)

    third = CountingAdapter()
    run_model(third, spec, samples, out)
    assert third.seen == []


def test_journal_outlives_the_deleted_output(tmp_path: Path) -> None:
    """Snakemake deletes a job's output before a re-run and after a failure; the journal keeps the answers."""
    spec = model(batch=ONE_PER_BATCH)
    samples = [prepared(i) for i in range(4)]
    out, journal = tmp_path / "pred.jsonl", tmp_path / "journal" / "pred.jsonl"

    first = CountingAdapter(interrupt_after=3)
    with pytest.raises(KeyboardInterrupt):
        run_model(first, spec, samples, out, journal)
    assert not out.exists()
    assert [r.sample_id for r in records(journal)] == [0, 1, 2]

    second = CountingAdapter()
    run_model(second, spec, samples, out, journal)
    assert second.seen == [3]
    assert records(out) == records(journal)

    out.unlink()
    third = CountingAdapter()
    run_model(third, spec, samples, out, journal)
    assert third.seen == []
    assert [r.response for r in records(out)] == [f"answer {i}" for i in range(4)]


def test_changed_generation_settings_rerun_everything(tmp_path: Path) -> None:
    samples = [prepared(i) for i in range(5)]
    out = tmp_path / "pred.jsonl"
    run_model(CountingAdapter(), model(), samples, out)
    changed = model(generation=Generation(max_new_tokens=8))
    assert cache_key(changed, samples[0], "test-1") != cache_key(model(), samples[0], "test-1")
    again = CountingAdapter()
    run_model(again, changed, samples, out)
    assert again.seen == [0, 1, 2, 3, 4]
    saved = records(out)
    assert len(saved) == 5
    assert {r.cache_key for r in saved} == {cache_key(changed, s, "test-1") for s in samples}


def test_cache_key_covers_images_prompt_and_adapter_version() -> None:
    spec = model()
    base = prepared(1)
    key = cache_key(spec, base, "v1")
    assert cache_key(spec, base, "v2") != key
    assert cache_key(spec, base.model_copy(update={"prompt_sha256": "0" * 64}), "v1") != key
    assert cache_key(spec, base.model_copy(update={"image_sha256": ("f" * 64,)}), "v1") != key
    assert cache_key(spec, prepared(1), "v1") == key


def test_cache_key_ignores_the_time_limit_and_sources_but_not_generation_settings() -> None:
    base = prepared(1)
    key = cache_key(model(), base, "v1")
    assert cache_key(model(sample_timeout_s=30), base, "v1") == key
    sourced = {"max_images": {"kind": "kit", "detail": "a test limit"}}
    assert cache_key(model(max_images=4, context_sources=sourced), base, "v1") == cache_key(
        model(max_images=4), base, "v1"
    )
    assert cache_key(model(generation=Generation(max_new_tokens=7)), base, "v1") != key


def test_failed_batch_recorded_and_run_continues(tmp_path: Path) -> None:
    spec = model(batch=ONE_PER_BATCH)
    samples = [prepared(i) for i in range(4)]
    out = tmp_path / "pred.jsonl"
    summary = run_model(CountingAdapter(fail_ids=[1]), spec, samples, out)
    assert summary.failed == 1
    saved = {r.sample_id: r for r in records(out)}
    assert saved[1].failure is FailureKind.ADAPTER_ERROR
    assert saved[1].response is None
    assert "ValueError: bad sample" in (saved[1].failure_detail or "")
    assert [saved[i].response for i in (0, 2, 3)] == ["answer 0", "answer 2", "answer 3"]
    assert (saved[0].input_tokens, saved[0].output_tokens) == (10, 2)

    retry = CountingAdapter()
    run_model(retry, spec, samples, out)
    assert retry.seen == [1]
    assert records(out)[1].response == "answer 1"


def test_oom_halves_the_batch_and_records_the_size_used(tmp_path: Path) -> None:
    out = tmp_path / "pred.jsonl"
    run_model(CountingAdapter(fail_ids=[0], oom=True), model(), [prepared(0), prepared(1)], out)
    saved = records(out)
    assert [r.failure for r in saved] == [FailureKind.OOM, None]
    assert saved[1].response == "answer 1" and saved[1].batch_size == 1


class BatchOomAdapter(CountingAdapter):
    """Runs out of GPU memory for any batch larger than ``fits``."""

    def __init__(self, fits: int) -> None:
        super().__init__()
        self.fits = fits
        self.calls: list[int] = []

    def generate(self, samples: Sequence[PreparedSample]) -> list[str]:
        self.calls.append(len(samples))
        if len(samples) > self.fits:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return super().generate(samples)


def test_oom_backoff_down_to_single_samples(tmp_path: Path) -> None:
    out = tmp_path / "pred.jsonl"
    samples = [prepared(i) for i in range(5)]
    adapter = BatchOomAdapter(fits=1)
    summary = run_model(adapter, model(), samples, out)
    assert summary.failed == 0
    assert adapter.seen == [0, 1, 2, 3, 4]
    assert adapter.calls == [5, 3, 2, 1, 1, 1, 2, 1, 1]
    saved = records(out)
    assert [r.response for r in saved] == [f"answer {i}" for i in range(5)]
    assert {r.batch_size for r in saved} == {1}
    wide = BatchOomAdapter(fits=8)
    run_model(wide, model(), [prepared(i) for i in range(10, 15)], tmp_path / "wide.jsonl")
    assert {r.batch_size for r in records(tmp_path / "wide.jsonl")} == {5}


class MixedAdapter(CountingAdapter):
    """Fails odd samples on their own, answers the others of the same batch."""

    def generate(self, samples: Sequence[PreparedSample]) -> list[str | SampleFailure]:
        answers = super().generate(samples)
        return [
            SampleFailure(FailureKind.TIMEOUT, "no answer within 1 s") if s.sample_id % 2 else a
            for s, a in zip(samples, answers, strict=True)
        ]

    def last_usage(self) -> list[TokenUsage]:
        return [TokenUsage(100, 4, seconds=0.5)] * self.batch_size


def test_per_sample_failures_in_a_batch_and_cost(tmp_path: Path) -> None:
    api = {
        "kind": "api",
        "provider": "openai",
        "model_id": "m",
        "pricing": {"price_per_1k_input": 0.01, "price_per_1k_output": 0.03},
    }
    spec = model("api-model", "openai-chat", weights=api, notes="test")
    out = tmp_path / "pred.jsonl"
    summary = run_model(MixedAdapter(), spec, [prepared(i) for i in range(4)], out)
    assert (summary.failed, summary.failures) == (2, {"timeout": 2})
    assert summary.failure_rate == 0.5
    saved = records(out)
    assert [r.failure for r in saved] == [None, FailureKind.TIMEOUT, None, FailureKind.TIMEOUT]
    assert saved[0].cost_usd == pytest.approx((100 * 0.01 + 4 * 0.03) / 1000)
    assert saved[0].seconds == 0.5 and saved[0].batch_size == 4
    assert saved[1].response is None and saved[1].failure_detail == "no answer within 1 s"
    assert records(out)[0].cost_usd is not None
    assert run_model(MixedAdapter(), model(), [prepared(0)], tmp_path / "free.jsonl").failed == 0
    assert records(tmp_path / "free.jsonl")[0].cost_usd is None


def test_combined_model_refuses_multi_image_samples(tmp_path: Path) -> None:
    spec = model(image_input="combined")
    adapter = CountingAdapter()
    with pytest.raises(AdapterError, match=r"at most 1 picture.*sample 1, mode multi-image has 3 images"):
        run_model(adapter, spec, [prepared(0), prepared(1, n_images=3)], tmp_path / "p.jsonl")
    assert adapter.seen == []
    run_model(adapter, spec, [prepared(0), prepared(1)], tmp_path / "p.jsonl")
    assert adapter.seen == [0, 1]
    run_model(
        CountingAdapter(),
        model(image_input="combined", max_images=3),
        [prepared(2, n_images=3)],
        tmp_path / "q.jsonl",
    )


def test_an_input_past_the_window_is_generated_and_recorded_as_the_official_code_did(tmp_path: Path) -> None:
    """The official code never checked the window: a sample over max_images or max_context_len is
    answered, and its prediction says by how much it went over."""
    adapter = CountingAdapter()  # reports 10 input tokens per sample
    out = tmp_path / "p.jsonl"
    spec = model(max_images=2, max_context_len=8)
    summary = run_model(adapter, spec, [prepared(0, n_images=2), prepared(1, n_images=3)], out)
    assert adapter.seen == [0, 1]
    assert (summary.failed, summary.over_window) == (0, 2)
    saved = records(out)
    assert all(p.failure is None and p.response for p in saved)
    assert saved[0].over_window == WindowExcess(
        input_tokens=10, max_context_len=8, tokens_over=2, images=2, max_images=2, images_over=0
    )
    assert saved[1].over_window == WindowExcess(
        input_tokens=10, max_context_len=8, tokens_over=2, images=3, max_images=2, images_over=1
    )
    within = run_model(
        CountingAdapter(), model(max_images=3), [prepared(2, n_images=3)], tmp_path / "q.jsonl"
    )
    assert within.over_window == 0 and records(tmp_path / "q.jsonl")[0].over_window is None


def test_the_strict_variant_refuses_more_images_than_the_model_takes(tmp_path: Path) -> None:
    out = tmp_path / "p.jsonl"
    samples = [prepared(0, n_images=2), prepared(1, n_images=3)]
    run_model(CountingAdapter(), model(max_images=2), samples, out)
    assert records(out)[1].over_window is not None
    adapter = CountingAdapter()
    strict = RunPolicy(context_overflow=ContextOverflow.REFUSE)
    summary = run_model(adapter, model(max_images=2), samples, out, policy=strict)
    assert adapter.seen == [], "the answer in range is reused, the one past the window is not"
    assert (summary.reused, summary.failures) == (1, {"context_overflow": 1})
    assert "3 images, model 'random' accepts at most 2" in (records(out)[1].failure_detail or "")


def test_failure_rate_above_the_run_limit_exits_non_zero(tmp_path: Path) -> None:
    ok = InferSummary(total=20, reused=0, generated=20, failed=1, failures={"api_error": 1})
    bad = InferSummary(total=20, reused=0, generated=20, failed=2, failures={"api_error": 1, "timeout": 1})
    assert failure_verdict(ok, 0.05, tmp_path) == 0
    assert failure_verdict(bad, 0.05, tmp_path) == 3
    assert failure_verdict(bad, 0.1, tmp_path) == 0


def test_torn_last_line_is_dropped_and_regenerated(tmp_path: Path) -> None:
    spec = model(batch=ONE_PER_BATCH)
    samples = [prepared(i) for i in range(3)]
    out = tmp_path / "pred.jsonl"
    run_model(CountingAdapter(), spec, samples, out)
    lines = out.read_text().splitlines(keepends=True)
    out.write_text(lines[0] + lines[1][:20])
    again = CountingAdapter()
    run_model(again, spec, samples, out)
    assert again.seen == [1, 2]
    assert [r.sample_id for r in records(out)] == [0, 1, 2]


def test_official_batching() -> None:
    rule = BatchRule()
    samples = [prepared(i, n_images=n) for i, n in enumerate([2, 5, 2, 2, 5, 30] + [2] * 12)]
    sizes = [[s.sample_id for s in b] for b in plan_batches(samples, rule)]
    twos = [0, 2, 3, *range(6, 18)]
    assert sizes == [twos[:12], twos[12:], [1, 4], [5]]
    single = [prepared(i, task="MMCoQA", n_images=2) for i in range(3)]
    assert [len(b) for b in plan_batches(single, rule)] == [1, 1, 1]


def test_random_adapter_is_deterministic_and_valid() -> None:
    adapter = RandomAdapter(model(), PATHS, Path("."))
    labelled = [prepared(i) for i in range(40)]
    answers = adapter.generate(labelled)
    assert answers == RandomAdapter(model(), PATHS, Path(".")).generate(labelled)
    assert answers[7:9] == adapter.generate(labelled[7:9])
    assert set(answers) <= {option_label(i) for i in range(4)}
    assert len(set(answers)) > 1
    other_seed = RandomAdapter(model(generation=Generation(seed=1)), PATHS, Path(".")).generate(labelled)
    assert other_seed != answers

    unlabelled = [prepared(i, task="GPR1200", labelled=False) for i in range(20)]
    assert set(adapter.generate(unlabelled)) <= {"cat", "dog", "cow", "pig"}
    assert adapter.generate([prepared(1, task="ALFRED", choices=None)]) == [""]


def test_oracle_answers_gold() -> None:
    samples = [prepared(0), prepared(1, choices=None)]
    assert OracleAdapter(model("oracle", "oracle"), PATHS, Path(".")).generate(samples) == [
        "dog",
        "gold text",
    ]


def test_unported_adapter_names_the_spec() -> None:
    spec = model("mini-gpt", "unported", notes="needs the original MiniGPT code", section="open-image")
    with pytest.raises(AdapterError, match=r"model spec 'mini-gpt': adapter 'unported' .*needs the original"):
        load_adapter(spec, PATHS, Path("."))


def test_preprocess_then_infer_handlers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = task_spec("WebQA", Group.S1, QuestionType.MULTI_CHOICE, ScorerKind.CHOICE, n_samples=3)
    run = RunSpec(
        name="t",
        description="t",
        models=("random",),
        data=FixtureSource(kind="fixture"),
        output_dir=str(tmp_path),
    )
    specs = Specs(tmp_path, {task.name: task}, {"random": model()}, {"t": run})
    monkeypatch.setattr(preprocess_commands, "load_specs", lambda _root: specs)
    monkeypatch.setattr(commands, "load_specs", lambda _root: specs)
    paths = RunPaths.for_run(run)
    folder = paths.data_root / task.name
    (folder / "images").mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(folder / "images" / "a.png")
    instance = {"context": "{image#1}Q?", "images_path": ["a.png"], "choice_list": ["x", "y", "z"]}
    data = [
        {
            "sample_id": i,
            "task_instruction_id": 0,
            "task_instance": instance,
            "response": "y",
            "image_quantity_level": "Few",
        }
        for i in range(3)
    ]
    meta = {"task_instruction": ["Answer."], "question_type": "multi-choice"}
    (folder / "WebQA.json").write_text(json.dumps({"meta_data": meta, "data": data}))

    args = argparse.Namespace(
        run="t",
        model="random",
        task=task.name,
        mode=Mode.MULTI_IMAGE,
        specs=tmp_path,
        root=Path("."),
        regime="full",
        workers=1,
        threads=3,
    )
    assert preprocess_commands.preprocess(args) == 0
    calls: list[dict[str, Any]] = []

    def noting_run_model(*a: Any, **kw: Any) -> InferSummary:
        calls.append(kw)
        return run_model(*a, **kw)

    monkeypatch.setattr(engine, "run_model", noting_run_model)
    built: list[RunPolicy | None] = []

    def noting_load_adapter(*a: Any, **kw: Any) -> Adapter:
        built.append(a[3])
        return load_adapter(*a, **kw)

    monkeypatch.setattr(registry, "load_adapter", noting_load_adapter)
    for name in THREAD_VARIABLES:
        monkeypatch.setenv(name, "unset")
    torch_threads = torch.get_num_threads()
    try:
        assert commands.infer(argparse.Namespace(**{**vars(args), "task": [task.name]})) == 0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(torch_threads)
    assert calls == [
        {"input_workers": 1, "data_root": None, "policy": run_policy(run, specs.models["random"])}
    ]
    saved = records(paths.predictions("random", task.name, Mode.MULTI_IMAGE))
    assert [r.sample_id for r in saved] == [0, 1, 2]
    assert all(r.response in {"A", "B", "C"} and r.model == "random" for r in saved)


def test_only_a_generation_without_an_end_and_short_of_its_budget_was_cut_by_time() -> None:
    assert cut_by_time_limit([5, 6], max_new_tokens=8, eos=2)
    assert not cut_by_time_limit([5, 2, 0], max_new_tokens=8, eos=2), "ended before the limit"
    assert not cut_by_time_limit([5] * 8, max_new_tokens=8, eos=[2, 3]), "used its whole budget"
    assert cut_by_time_limit([], max_new_tokens=8, eos=None)


def test_thread_limit_reaches_torch_whether_or_not_it_is_loaded() -> None:
    """In fresh interpreters: torch imported after the limit, and torch imported before it."""
    check = (
        "import sys; from milebench.infer.threads import limit_threads; {before}"
        "limit_threads(1); import torch, os; "
        "sys.exit(0 if torch.get_num_threads() == 1 and os.environ['OMP_NUM_THREADS'] == '1' else 1)"
    )
    for before in ("", "import torch; torch.set_num_threads(2); "):
        assert subprocess.run([sys.executable, "-c", check.format(before=before)]).returncode == 0, before


def test_weights_lock_pins_hub_revision(tmp_path: Path) -> None:
    hub = {"kind": "hf", "repo_id": "llava-hf/llava-1.5-7b-hf"}
    spec = model("llava-1.5-7b", "hf-llava", weights=hub, max_context_len=4096, n_tokens_per_image=576)
    assert pin_weights(spec, tmp_path) is spec
    commit = "a" * 40
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks/weights.lock.yaml").write_text(f"revisions: {{llava-1.5-7b: '{commit}'}}\n")
    pinned = pin_weights(spec, tmp_path)
    assert pinned.weights.revision == commit  # type: ignore[union-attr]
    assert cache_key(pinned, prepared(0), "v") != cache_key(spec, prepared(0), "v")
    assert pin_weights(model("random"), tmp_path) == model("random")


def test_a_prepared_file_with_a_garbage_line_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "prepared.jsonl"
    good = prepared(0).model_dump_json()
    path.write_text(f"{good}\nnot json\n{good}\n")
    with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}: record 2: .*Invalid JSON"):
        read_prepared(path, "milebench preprocess ...")
