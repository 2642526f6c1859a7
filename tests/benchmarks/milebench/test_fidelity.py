"""The report's execution fidelity table: each model's aspects against the run the paper reports."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from milebench.benchmarks.milebench.report.fidelity import (
    BUDGET,
    COLUMNS,
    Fidelity,
    FidelityRow,
    fidelity_rows,
    telling,
)
from milebench.benchmarks.milebench.report.render import render_html, render_tex
from milebench.benchmarks.milebench.report.tables import Notes, Report
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.spec.execution import Aspect
from milebench.spec.model import Section


@pytest.fixture(scope="module")
def specs() -> Specs:
    return load_specs()


def by_model(rows: list[FidelityRow]) -> dict[str, dict[str, tuple[Fidelity, str]]]:
    return {r.model: {c.key: (cell.status, cell.text) for c, cell in r.cells} for r in rows}


def paper_run(specs: Specs, **execution: str) -> RunSpec:
    return specs.run("paper").model_copy(update={"execution": execution})


def test_llava_1_5_runs_as_the_official_worker_but_for_its_tokenizer(specs: Specs) -> None:
    cells = by_model(fidelity_rows(specs, paper_run(specs)))["llava-1.5-7b"]
    assert cells[Aspect.PROMPT] == (Fidelity.AS_OFFICIAL, "llava_llama_2")
    assert cells[Aspect.IMAGES] == (Fidelity.AS_OFFICIAL, "pad_to_square; pil")
    assert cells[Aspect.DECODING] == (Fidelity.AS_OFFICIAL, "per_sample")
    assert cells[Aspect.PRECISION] == (Fidelity.AS_OFFICIAL, "float16; autocast bfloat16")
    assert cells[Aspect.STOP] == (Fidelity.AS_OFFICIAL, "'<s>'")
    status, why = cells[Aspect.TOKENIZER]
    assert status is Fidelity.DIFFERS
    assert why == specs.models["llava-1.5-7b"].execution.deviations[Aspect.TOKENIZER]  # type: ignore[union-attr]
    assert cells[BUDGET] == (Fidelity.AS_OFFICIAL, "4096 tokens, 576 per image (model-config)")


def test_a_variant_differs_in_exactly_the_aspects_it_changes(specs: Specs) -> None:
    paper = by_model(fidelity_rows(specs, paper_run(specs)))["llava-1.5-7b"]
    batched = by_model(fidelity_rows(specs, paper_run(specs, **{"llava-1.5-7b": "batched"})))["llava-1.5-7b"]
    changed = {key for key in paper if paper[key] != batched[key]}
    assert changed == {Aspect.DECODING.value}
    status, why = batched[Aspect.DECODING]
    assert status is Fidelity.DIFFERS
    assert why.startswith("variant 'batched' runs batched: ")


def test_models_without_a_stated_execution_are_never_called_official(specs: Specs) -> None:
    run = paper_run(specs)
    rows = by_model(fidelity_rows(specs, run))
    assert set(rows) == set(run.models)
    for name, cells in rows.items():
        spec = specs.models[name]
        aspects = {cells[a.value][0] for a in Aspect}
        if spec.adapter == "unported":
            assert aspects == {Fidelity.NOT_PORTED} and cells[BUDGET][0] is Fidelity.NOT_PORTED
        elif spec.adapter in ("openai-chat", "anthropic", "gemini"):
            assert aspects == {Fidelity.NOT_APPLICABLE}
        elif spec.builtin:
            assert aspects == {Fidelity.NOT_APPLICABLE} and cells[BUDGET][0] is Fidelity.NOT_APPLICABLE
        elif spec.execution is None:
            assert aspects == {Fidelity.UNKNOWN}, name
        elif spec.execution.no_official_worker:
            assert Fidelity.AS_OFFICIAL not in aspects, name
        else:
            assert Fidelity.UNKNOWN not in aspects, name


@pytest.mark.parametrize("name", ["qwen-vl-chat", "allava-longer"])
def test_models_without_an_official_worker_are_unknown_in_every_aspect_with_what_the_kit_runs(
    specs: Specs, name: str
) -> None:
    """Their specs state how the checkpoint's own code runs them, but the paper's run of them is not
    published: no aspect can be called as official."""
    cells = by_model(fidelity_rows(specs, paper_run(specs)))[name]
    execution = specs.models[name].execution
    assert execution is not None and execution.no_official_worker
    assert {cells[a.value][0] for a in Aspect} == {Fidelity.UNKNOWN}
    assert cells[Aspect.PROMPT][1] == f"{execution.prompt_template}; {execution.no_official_worker}"
    assert cells[BUDGET][0] is Fidelity.AS_OFFICIAL


def test_a_budget_without_a_source_is_unknown(specs: Specs) -> None:
    rows = by_model(fidelity_rows(specs, paper_run(specs)))
    for name, cells in rows.items():
        spec = specs.models[name]
        unsourced = spec.context_sources.max_context_len is None or (
            spec.context_sources.max_context_len.kind.value == "none"
        )
        if unsourced and spec.adapter != "unported" and not spec.builtin:
            assert cells[BUDGET][0] is Fidelity.UNKNOWN, name


def test_kit_models_have_no_published_run_to_match(specs: Specs) -> None:
    run = specs.run("smoke")
    rows = by_model(fidelity_rows(specs, run))
    kit = [m for m in run.models if specs.models[m].section is Section.KIT]
    assert kit
    for name in kit:
        assert {status for status, _ in rows[name].values()} == {Fidelity.NOT_APPLICABLE}


class CellReader(HTMLParser):
    """(model, aspect) -> data-status of the fidelity table's cells."""

    def __init__(self) -> None:
        super().__init__()
        self.model: str | None = None
        self.cells: dict[tuple[str, str], str] = {}
        self.inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self.inside = a.get("id") == "fidelity-table"
        elif self.inside and tag == "tr":
            self.model = a.get("data-model")
        elif self.inside and tag == "td" and "data-aspect" in a and self.model:
            self.cells[(self.model, str(a["data-aspect"]))] = str(a["data-status"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False


def test_the_report_shows_every_cell_with_its_status(specs: Specs) -> None:
    run = paper_run(specs, **{"llava-1.5-7b": "batched"})
    rows = fidelity_rows(specs, run)
    report = Report(
        run=run, modes=[], contamination=None, notes=Notes(caption="c", source="s"), fidelity=rows
    )
    reader = CellReader()
    reader.feed(render_html(report))
    expected = {(r.model, c.key): cell.status.value for r in rows for c, cell in r.cells}
    assert reader.cells == expected
    assert len(expected) == len(run.models) * len(COLUMNS)
    tex = render_tex(report)
    assert r"LLaVA-1.5-7B (batched) & Prompt template & as official & llava\_llama\_2 \\" in tex


def test_a_grid_with_nothing_but_not_applicable_folds_away(specs: Specs) -> None:
    """The smoke run's baseline and kit models have no published run to match: no grid; one model with
    an execution to compare keeps every row."""
    smoke = specs.run("smoke")
    rows = fidelity_rows(specs, smoke)
    assert rows and {cell.status for r in rows for _, cell in r.cells} == {Fidelity.NOT_APPLICABLE}
    assert telling(rows) == []
    mixed = fidelity_rows(specs, smoke.model_copy(update={"models": (*smoke.models, "llava-1.5-7b")}))
    assert telling(mixed) == mixed
