"""The run policy: decided once per job from the run spec and the model spec as the run loads it, and the
one value the adapter is built with."""

from __future__ import annotations

from pathlib import Path

from picture_samples import picture_sample, write_pictures

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.infer.hf_llava import HfLlavaAdapter
from milebench.infer.registry import load_adapter
from milebench.infer.tiny import build_tiny
from milebench.spec.policy import ContextOverflow, RunPolicy, run_policy


def test_the_policy_takes_the_runs_settings_and_the_selected_variants_stop_strings() -> None:
    specs = load_specs()
    smoke = specs.run("smoke")
    strict = smoke.model_copy(update={"context_overflow": ContextOverflow.REFUSE, "max_failure_rate": 0.25})
    paper_choices = run_policy(strict, specs.loaded_model(strict, "tiny-llava"))
    assert paper_choices == RunPolicy(
        context_overflow=ContextOverflow.REFUSE, stop_strings=("<s>",), max_failure_rate=0.25
    )
    on_vllm = strict.model_copy(update={"execution": {"tiny-llava": "vllm"}})
    assert run_policy(on_vllm, specs.loaded_model(on_vllm, "tiny-llava")).stop_strings == ()
    assert run_policy(smoke, specs.loaded_model(smoke, "random")) == RunPolicy(), "a run spec's defaults"


def test_the_adapter_reads_the_policy_it_was_built_with(tmp_path: Path) -> None:
    """The stop strings the adapter stops on are its policy's: a policy without any builds no stopper."""
    specs = load_specs()
    spec = specs.loaded_model(specs.run("smoke"), "tiny-llava")
    paths = RunPaths(out=tmp_path, reports=tmp_path)
    build_tiny(spec, paths.model_dir(spec.name))
    write_pictures(paths, [(8, 8)])
    policy = RunPolicy(context_overflow=ContextOverflow.REFUSE)
    adapter = load_adapter(spec, paths, paths.data_root, policy)
    assert isinstance(adapter, HfLlavaAdapter) and adapter.policy is policy
    inputs = adapter.encode([picture_sample(0, 1)])
    assert adapter.stopper(inputs) is None
    default = load_adapter(spec, paths, paths.data_root)
    assert isinstance(default, HfLlavaAdapter) and default.policy == run_policy(None, spec)
    stop = default.stopper(inputs)
    assert stop is not None and stop.keywords == ["<s>"]
