"""The ``vllm`` execution variant: chosen by name only, shown in the fidelity table, refused with its
reason where vLLM is absent, and, where it is installed, answering the tiny LLaVA on the CPU with its
drift against the transformers backend measured."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
import yaml

from milebench.benchmarks.milebench.audit.drift import Side, drift_audit
from milebench.benchmarks.milebench.fixture.prepared import prepared_fixture
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.report.fidelity import shown
from milebench.benchmarks.milebench.score.commands import score_task
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.infer.adapter import AdapterError
from milebench.infer.records import Prediction
from milebench.infer.registry import VLLM_ENVIRONMENT, adapter_class, adapter_environment, load_adapter
from milebench.infer.tiny import build_tiny
from milebench.spec.base import SpecError
from milebench.spec.execution import PAPER, Aspect, Backend
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import execution_of, for_run
from milebench.spec.policy import ContextOverflow, run_policy

VLLM = importlib.util.find_spec("vllm") is not None


def vllm_variants(specs: Specs) -> list[tuple[str, str]]:
    """(model, variant) for every variant of the specs that runs on vLLM."""
    return [
        (name, variant)
        for name, spec in specs.models.items()
        if spec.execution is not None
        for variant, choices in spec.execution.variants.items()
        if choices.backend is Backend.VLLM
    ]


def with_variant(spec: ModelSpec, variant: str) -> ModelSpec:
    execution = execution_of(spec)
    assert execution is not None
    return spec.model_copy(update={"execution": execution.with_variant(variant)})


@pytest.mark.parametrize("model", ["llava-1.5-7b", "llava-1.5-13b", "tiny-llava"])
def test_vllm_is_a_named_variant_never_the_paper_run(model: str) -> None:
    spec = load_specs().models[model]
    execution = execution_of(spec)
    assert execution is not None and execution.backend is Backend.TRANSFORMERS
    assert "backend" not in execution.model_dump(), "a transformers execution dumps (and hashes) as before"
    assert adapter_class(spec).__name__ != "VllmAdapter"
    assert adapter_class(with_variant(spec, "vllm")).__name__ == "VllmAdapter"


def test_a_vllm_variant_runs_in_the_vllm_image_and_the_paper_run_in_the_models_own() -> None:
    """The run's model spec carries the image family the selected variant names; the variant's family is
    never an execution choice."""
    specs = load_specs()
    found = vllm_variants(specs)
    assert {name for name, _ in found} >= {"llava-1.5-7b", "tiny-llava"}
    paper_run = specs.run("paper")
    for name, variant in found:
        spec = specs.models[name]
        assert spec.container is not None and spec.container != "vllm", name
        paper, on_vllm = (
            for_run(spec, paper_run.model_copy(update={"execution": {name: chosen}}))
            for chosen in (PAPER, variant)
        )
        assert paper.container == spec.container, name
        assert on_vllm.container == "vllm", name
        execution = execution_of(on_vllm)
        assert execution is not None and execution.backend is Backend.VLLM
        assert "container" not in execution.model_dump(), "the image is the model spec's, not a choice"
        passed = adapter_environment(on_vllm)
        assert set(passed) - set(adapter_environment(paper)) == set(VLLM_ENVIRONMENT), name
    tiny = specs.models["tiny-llava"]
    batched = for_run(tiny, specs.run("smoke").model_copy(update={"execution": {tiny.name: "batched"}}))
    assert batched.container == tiny.container, "a variant naming no image keeps the model's"
    execution = execution_of(tiny)
    assert execution is not None
    assert "container" not in execution.variants["batched"].model_dump(), "dumped (and hashed) as before"


def test_a_vllm_variant_of_a_model_with_an_image_must_name_its_own(tmp_path: Path) -> None:
    """The model's image has no vllm: without a family of its own the variant would fail only at load,
    inside the container."""
    root = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, root)
    path = root / "models" / "tiny-llava.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    del data["execution"]["variants"]["vllm"]["container"]
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_specs(root)
    assert str(path) in str(err.value)
    assert "execution.variants.vllm.container: required with backend vllm" in str(err.value)


def test_fidelity_table_names_the_backend() -> None:
    spec = load_specs().models["llava-1.5-7b"]
    paper, vllm = execution_of(spec), execution_of(with_variant(spec, "vllm"))
    assert paper is not None and vllm is not None
    assert shown(paper, Aspect.DECODING) == "per_sample"
    assert shown(vllm, Aspect.DECODING) == "batched; backend vllm"


def test_choices_vllm_cannot_carry_out_stop_the_job_at_load(tmp_path: Path) -> None:
    """The paper choices (per-chunk ids, per-sample decoding, a stop string) with the vllm engine."""
    spec = load_specs().models["tiny-llava"]
    execution = execution_of(spec)
    assert execution is not None
    vllm_paper = spec.model_copy(update={"execution": execution.model_copy(update={"backend": Backend.VLLM})})
    paths = RunPaths(out=tmp_path, reports=tmp_path)
    with pytest.raises(AdapterError, match="tokenization per_chunk, decoding per_sample, stop_strings"):
        load_adapter(vllm_paper, paths, paths.data_root)


def test_a_run_policy_vllm_cannot_carry_out_stops_the_job_at_load_naming_the_setting(tmp_path: Path) -> None:
    """vLLM has no window check before the call: a run that refuses inputs past the window is refused at
    load, the setting named, never answered as if it generated them."""
    specs = load_specs()
    run = specs.run("smoke").model_copy(
        update={"execution": {"tiny-llava": "vllm"}, "context_overflow": ContextOverflow.REFUSE}
    )
    spec = specs.loaded_model(run, "tiny-llava")
    paths = RunPaths(out=tmp_path, reports=tmp_path)
    with pytest.raises(AdapterError, match=r"cannot carry out the run's context_overflow refuse$"):
        load_adapter(spec, paths, paths.data_root, run_policy(run, spec))


@pytest.mark.skipif(VLLM, reason="vllm is installed here: the refusal is for hosts without it")
def test_without_vllm_the_variant_stops_at_load_with_the_reason(tmp_path: Path) -> None:
    spec = with_variant(load_specs().models["tiny-llava"], "vllm")
    paths = RunPaths(out=tmp_path, reports=tmp_path)
    with pytest.raises(AdapterError, match="vllm is not installed"):
        load_adapter(spec, paths, paths.data_root)


@pytest.mark.skipif(not VLLM, reason="vllm is not installed (the optional vllm extra: containers/vllm)")
def test_vllm_answers_the_tiny_llava_and_its_drift_is_reported(tmp_path: Path) -> None:
    specs = load_specs()
    base = specs.models["tiny-llava"]
    paths = RunPaths(out=tmp_path, reports=tmp_path / "reports")
    build_tiny(base, paths.model_dir(base.name))
    task = specs.tasks["ActionLocalization"]
    samples = prepared_fixture(paths, [task], 4)[task.name]
    sides = []
    for variant in ("paper", "vllm"):
        adapter = load_adapter(with_variant(base, variant), paths, paths.data_root)
        answers = adapter.generate(samples)
        assert len(answers) == len(samples) and all(isinstance(a, str) for a in answers)
        preds = {
            s.sample_id: Prediction(
                task=s.task, mode=s.mode, model=base.name, sample_id=s.sample_id, response=str(a),
                cache_key=variant, seconds=0.0,
            )
            for s, a in zip(samples, answers, strict=True)
        }  # fmt: skip
        judgments, _ = score_task(task, base.name, Mode.MULTI_IMAGE, samples, preds)
        sides.append(Side(variant, {task.name: judgments}, {task.name: preds}))
    paper, vllm = sides
    audit = drift_audit(paper, vllm, [task], "paper", resamples=200)
    pooled = audit.tasks[-1]
    assert pooled.task == "all" and pooled.flips.total == len(samples) and pooled.texts.total == len(samples)
