"""Spec rules stated as facts: the evaluator's dispatch, what a spec must explain, where errors point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mini_specs import builtin_model, task_spec
from pydantic import ValidationError

from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.task import (
    Group,
    QuestionType,
    ScorerKind,
    TaskSpec,
    official_scorer,
)
from milebench.spec.base import SpecError, field_path, read_yaml, spec_hash
from milebench.spec.execution import GENERIC
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import execution_of, variant_problem

MC, OE = QuestionType.MULTI_CHOICE, QuestionType.OPEN_ENDED


@pytest.mark.parametrize(
    ("name", "question_type", "scorer"),
    [
        ("TextNeedleInAHaystack", MC, ScorerKind.NEEDLE),  # the name decides before the question type
        ("ImageNeedleInAHaystack", OE, ScorerKind.NEEDLE),
        ("MMCoQA", MC, ScorerKind.SUBSTRING),
        ("WebQA", OE, ScorerKind.ROUGE_L),
        ("WebQA", MC, ScorerKind.CHOICE),
    ],
)
def test_the_evaluator_dispatches_by_name_then_question_type(
    name: str, question_type: QuestionType, scorer: ScorerKind
) -> None:
    assert official_scorer(name, question_type) is scorer


def test_a_rouge_task_is_measured_in_rouge_and_the_others_in_accuracy() -> None:
    rouge = task_spec("Spot-the-Diff", Group.S3, OE, ScorerKind.ROUGE_L).model_dump()
    with pytest.raises(ValidationError, match=r"metric accuracy does not match scorer rouge-l \(rouge-l\)"):
        TaskSpec.model_validate(rouge | {"metric": "accuracy"})
    choice = task_spec("WebQA", Group.S1, MC, ScorerKind.CHOICE).model_dump()
    with pytest.raises(ValidationError, match=r"metric rouge-l does not match scorer choice \(accuracy\)"):
        TaskSpec.model_validate(choice | {"metric": "rouge-l"})


def test_unlettered_options_exist_only_for_multi_choice_tasks() -> None:
    rouge = task_spec("Spot-the-Diff", Group.S3, OE, ScorerKind.ROUGE_L).model_dump()
    with pytest.raises(ValidationError, match="labelled_choices=false only applies to multi-choice tasks"):
        TaskSpec.model_validate(rouge | {"labelled_choices": False})
    gpr = task_spec("GPR1200", Group.I1, MC, ScorerKind.CHOICE, labelled_choices=False)
    assert gpr.labelled_choices is False


def hub_model(**changes: Any) -> dict[str, Any]:
    weights = {"kind": "hf", "repo_id": "org/m"}
    fields = {"name": "m", "display_name": "M", "section": "open-image", "adapter": "hf-llava",
              "weights": weights, "max_context_len": 4096, "n_tokens_per_image": 576}  # fmt: skip
    return fields | changes


@pytest.mark.parametrize(
    ("changes", "unknown"),
    [
        ({"max_context_len": None}, "max_context_len"),
        ({"n_tokens_per_image": None}, "n_tokens_per_image"),
        ({"max_context_len": None, "n_tokens_per_image": None}, "max_context_len, n_tokens_per_image"),
        ({"adapter": "unported"}, "adapter"),
    ],
)
def test_unknown_model_settings_need_notes(changes: dict[str, Any], unknown: str) -> None:
    with pytest.raises(
        ValidationError, match=f"notes must explain the unknown or unported fields: {unknown} \\["
    ):
        ModelSpec.model_validate(hub_model(**changes))
    assert ModelSpec.model_validate(hub_model(**changes, notes="why")).notes == "why"


@pytest.mark.parametrize("adapter", ["random", "oracle"])
def test_baselines_need_no_context_settings(adapter: str) -> None:
    assert builtin_model(adapter, adapter).max_context_len is None


def test_error_paths_are_dotted_and_the_root_has_a_name() -> None:
    assert field_path(("models", 3, "name")) == "models.3.name"
    assert field_path(()) == "<root>"


def test_a_yaml_error_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("name: x\nmodels: [a, b\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        read_yaml(path)
    assert err.value.path == path
    [(where, message)] = err.value.problems
    assert where == "line 3" and message.startswith("invalid YAML: ")
    with pytest.raises(SpecError) as err:
        read_yaml(tmp_path / "absent.yaml")
    assert err.value.problems == [("<file>", "file not found")]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: 1\nb: 2\nc: \x07\n", "line 3: invalid YAML: character #x0007 is not allowed"),
        (
            "a: 1\nb: [1, 2\nc: 3\n",
            "line 3: invalid YAML: expected ',' or ']', but got ':' "
            "(while parsing a flow sequence started on line 2)",
        ),
        ("a: 1\n  b: 2\n", "line 2: invalid YAML: mapping values are not allowed here"),
    ],
)
def test_a_yaml_error_names_the_line_of_the_fault_and_where_its_block_started(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        read_yaml(path)
    assert str(err.value) == f"{path}: {problem}"


def test_a_spec_stating_no_execution_runs_with_its_adapter_s_default() -> None:
    fields = {"name": "tiny", "display_name": "t", "section": "kit", "adapter": "hf-llava",
              "weights": {"kind": "tiny", "family": "llava"}, "max_context_len": 96,
              "n_tokens_per_image": 16}  # fmt: skip
    assert execution_of(ModelSpec.model_validate(fields)) is GENERIC  # hf-llava declares the generic path
    assert execution_of(load_specs().models["random"]) is None  # a baseline has no execution


def test_an_execution_variant_must_be_one_the_model_states() -> None:
    models = load_specs().models
    execution = models["llava-1.5-7b"].execution
    assert execution is not None and "batched" in execution.variants
    known = ", ".join(["paper", *sorted(execution.variants)])  # the default first, then by name
    assert variant_problem(models["llava-1.5-7b"], "batched") is None
    assert variant_problem(models["llava-1.5-7b"], "paper") is None
    assert variant_problem(models["llava-1.5-7b"], "nope") == (
        f"model 'llava-1.5-7b' has no execution variant 'nope' (known: {known})"
    )
    assert variant_problem(models["random"], "batched") == (
        "model 'random' has no execution variant 'batched' (known: paper)"
    )
    assert execution.with_variant("paper") is execution
    with pytest.raises(KeyError) as err:
        execution.with_variant("nope")
    assert err.value.args == (f"no execution variant 'nope' (known: {known})",)


def test_a_spec_hash_ignores_formatting_and_follows_content() -> None:
    specs = load_specs()
    task = specs.tasks["WebQA"]
    assert spec_hash(task) == spec_hash(task.model_copy())
    assert spec_hash(task) != spec_hash(task.model_copy(update={"n_samples": task.n_samples + 1}))
    assert len(spec_hash(task)) == 64


def test_a_spec_hash_ignores_the_order_of_keys_in_a_mapping() -> None:
    run = load_specs().runs["smoke"]
    forward = run.model_copy(update={"execution": {"a": "batched", "b": "llava-hf"}})
    backward = run.model_copy(update={"execution": {"b": "llava-hf", "a": "batched"}})
    assert spec_hash(forward) == spec_hash(backward)


def test_a_spec_hash_leaves_out_the_fields_it_is_told_to() -> None:
    run = load_specs().runs["smoke"]
    renamed = run.model_copy(update={"description": "another description"})
    assert spec_hash(run, exclude=frozenset({"description"})) == spec_hash(
        renamed, exclude=frozenset({"description"})
    )
    assert spec_hash(run) != spec_hash(renamed)


def test_an_unknown_run_lists_the_known_ones() -> None:
    specs = load_specs()
    with pytest.raises(SpecError) as err:
        specs.run("nope")
    assert err.value.path == specs.root / "runs"
    assert err.value.problems == [("name", f"no run spec 'nope'; known: {', '.join(sorted(specs.runs))}")]
