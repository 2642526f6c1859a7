"""The verdict sets each reproduced main-table cell beside the published one, with flags and ranks."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_report import (  # noqa: F401
    TASKS,
    allow_incomplete,
    read_data_elsewhere,
    run_report,
    specs_dir,
    write_scores,
)

from milebench.benchmarks.milebench.paper import PaperSpec
from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.report.verdict_view import build_verdict_view
from milebench.benchmarks.milebench.score.uncertainty import TaskSamples
from milebench.benchmarks.milebench.score.verdict import (
    COLUMNS,
    Verdict,
    build_verdict,
    inconsistent_cells,
    rank_correlation,
)
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import Group
from milebench.io import atomic_write_jsonl
from milebench.spec.base import load_spec
from milebench.spec.folder import DEFAULT_SPECS
from milebench.verdict import ROUNDING, Agreement, Standing, agreement, in_interval, summarise_agreement

SPECS = DEFAULT_SPECS


@pytest.fixture(scope="module")
def paper() -> PaperSpec:
    return load_spec(SPECS / "paper.yaml", PaperSpec)


@pytest.fixture(scope="module")
def tasks():
    return list(load_specs(SPECS).tasks.values())


def exact(fraction: float, n: int = 1000) -> TaskSamples:
    """n samples whose mean is ``fraction`` (to 1/n)."""
    k = round(fraction * n)
    return TaskSamples(
        ids=tuple(range(n)), scores=np.array([1.0] * k + [0.0] * (n - k)), n_expected=n, n_scored=n
    )


def samples_for(paper: PaperSpec, tasks, model: str, shift: float = 0.0) -> dict[str, TaskSamples]:
    """Every task of a group scores the group's printed value (+ shift points)."""
    row = next(r for r in paper.main_table.rows if r.model == model)
    return {t.name: exact((row.groups[t.group] + shift) / 100) for t in tasks}


def run(models: tuple[str, ...], tolerance: float = 1.0) -> RunSpec:
    return RunSpec(
        name="v", description="d", models=models, data=FixtureSource(kind="fixture"), tolerance=tolerance
    )


def test_cells_compare_ours_with_the_printed_values(paper: PaperSpec, tasks) -> None:
    samples = {"vila": samples_for(paper, tasks, "vila", shift=0.5), "oracle": {}}
    verdict = build_verdict(run(("vila", "oracle")), paper, tasks, samples, resamples=200)
    assert isinstance(verdict, Verdict)
    assert len(verdict.cells) == len(COLUMNS)  # the oracle has no published row
    cells = {c.column: c for c in verdict.cells}
    t1 = cells["T-1"]
    vila = next(r for r in paper.main_table.rows if r.model == "vila")
    assert t1.published == vila.groups[Group.T1]
    assert t1.difference == pytest.approx(0.5, abs=0.051)
    assert t1.passed and t1.coverage == 1.0
    assert t1.ci_low < t1.ours < t1.ci_high
    assert cells["overall_real"].passed
    assert verdict.table.counts[Agreement.REPRODUCED] == len(COLUMNS) and verdict.all_reproduced


def test_tolerance_decides_pass_and_missing_tasks_are_unreproduced(paper: PaperSpec, tasks) -> None:
    samples = samples_for(paper, tasks, "vila", shift=2.0)
    del samples["GPR1200"]
    verdict = build_verdict(run(("vila",), tolerance=1.0), paper, tasks, {"vila": samples}, resamples=100)
    cells = {c.column: c for c in verdict.cells}
    assert cells["T-2"].passed is False
    assert cells["I-1"].ours is None and cells["I-1"].passed is None
    assert cells["overall_diag"].passed is None
    # N-1 and N-2: 1000 scored each; I-1: none of its 600 specified samples.
    assert cells["overall_diag"].coverage == pytest.approx(2000 / 2600)
    assert cells["I-1"].coverage == 0.0
    assert verdict.table.counts[Agreement.NO_SCORE] == 2


def test_inconsistent_cells_are_flagged_with_their_note(paper: PaperSpec, tasks) -> None:
    flags = inconsistent_cells(paper)
    assert ("gpt-4v", "overall_diag") in flags
    assert {("llava-1.6-7b", c) for c in ("T-1", "T-2", "T-3", "T-4")} <= set(flags)
    verdict = build_verdict(run(("gpt-4v",)), paper, tasks, {"gpt-4v": samples_for(paper, tasks, "gpt-4v")},
                            resamples=100)  # fmt: skip
    diag = next(c for c in verdict.cells if c.column == "overall_diag")
    assert diag.flagged and "N-1 and N-2 only" in diag.flag_note
    # Following the paper's own rule gives the mean of N-1, N-2 and I-1, so the printed 99.4 is missed.
    assert diag.passed is False
    assert not next(c for c in verdict.cells if c.column == "T-1").flagged


def test_rank_correlation_is_spearman_over_models(paper: PaperSpec, tasks) -> None:
    models = ("gpt-4o", "vila", "cheetor", "random")
    samples = {m: samples_for(paper, tasks, m) for m in models}
    verdict = build_verdict(run(models), paper, tasks, samples, resamples=50)
    real = next(r for r in verdict.rank_correlations if r.column == "overall_real")
    assert real.rho == pytest.approx(1.0) and real.n_models == 4
    reversed_ = rank_correlation("x", {"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 3.0, "b": 2.0, "c": 1.0})
    assert reversed_.rho == pytest.approx(-1.0)
    assert rank_correlation("x", {"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}).rho is None


def test_a_difference_exactly_at_the_tolerance_is_reproduced(paper: PaperSpec, tasks) -> None:
    assert agreement(26.0, 25.0, inside=False, tolerance=1.0) is Agreement.REPRODUCED
    assert agreement(24.0, 25.0, inside=False, tolerance=1.0) is Agreement.REPRODUCED
    assert agreement(26.0 + 1e-6, 25.0, inside=False, tolerance=1.0) is Agreement.NOT_REPRODUCED
    samples = samples_for(paper, tasks, "vila", shift=0.5)
    verdict = build_verdict(run(("vila",), tolerance=0.5), paper, tasks, {"vila": samples}, resamples=100)
    t1 = next(c for c in verdict.cells if c.column == "T-1")
    assert t1.difference == pytest.approx(0.5, abs=1e-9) and t1.agreement is Agreement.REPRODUCED
    assert verdict.columns["T-1"].state is Agreement.REPRODUCED
    assert verdict.table.state is Agreement.REPRODUCED and verdict.all_reproduced


def test_outside_the_tolerance_but_inside_the_interval_is_consistent(paper: PaperSpec, tasks) -> None:
    # The smoke run's Random row: T-1 published 25.0, ours 22.2 over 9 samples, interval [0.0, 44.4].
    assert in_interval(25.0, 0.0, 44.4) is True
    assert agreement(22.2, 25.0, inside=True, tolerance=1.0) is Agreement.CONSISTENT
    # The printed value stands for anything within 0.05 of it: the interval is widened by that much.
    assert in_interval(44.4 + ROUNDING, 0.0, 44.4) is True and in_interval(-ROUNDING, 0.0, 44.4) is True
    few = {
        t.name: TaskSamples(ids=(0, 1, 2), scores=np.array([0.0, 1.0, 0.0]), n_expected=3, n_scored=3)
        for t in tasks
    }
    verdict = build_verdict(run(("random",)), paper, tasks, {"random": few}, resamples=500)
    t1 = next(c for c in verdict.cells if c.column == "T-1")
    assert not t1.passed and t1.published_in_interval and t1.agreement is Agreement.CONSISTENT
    assert verdict.columns["T-1"].state is Agreement.CONSISTENT and not verdict.all_reproduced


def test_an_interval_that_excludes_the_published_value_is_not_reproduced(paper: PaperSpec, tasks) -> None:
    assert in_interval(44.4 + ROUNDING + 1e-6, 0.0, 44.4) is False
    assert agreement(50.0, 44.5, inside=False, tolerance=1.0) is Agreement.NOT_REPRODUCED
    samples = samples_for(paper, tasks, "vila", shift=5.0)  # 1000 samples a task: narrow intervals
    verdict = build_verdict(run(("vila",)), paper, tasks, {"vila": samples}, resamples=200)
    t1 = next(c for c in verdict.cells if c.column == "T-1")
    assert t1.published_in_interval is False and t1.agreement is Agreement.NOT_REPRODUCED
    assert verdict.columns["T-1"].state is Agreement.NOT_REPRODUCED
    assert verdict.table.state is Agreement.NOT_REPRODUCED
    assert verdict.table.counts[Agreement.NOT_REPRODUCED] == len(COLUMNS)


def test_summary_states_rank_not_reproduced_over_consistent_over_reproduced() -> None:
    ok, near, far, none = (Agreement.REPRODUCED, Agreement.CONSISTENT, Agreement.NOT_REPRODUCED,
                           Agreement.NO_SCORE)  # fmt: skip
    assert summarise_agreement([ok, Agreement.RULE, none]).state is ok
    assert summarise_agreement([ok, near, none]).state is near
    assert summarise_agreement([ok, near, far]).state is far
    assert summarise_agreement([none, none]).state is none
    assert summarise_agreement([ok, near, far, none]).counts == {
        ok: 1, Agreement.RULE: 0, near: 1, far: 1, none: 1
    }  # fmt: skip


STATE_SCORES = {
    # T-1 of the test paper spec is published as 10.0 (tolerance 1.0); sample scores of each T-1 task.
    "reproduced": [1.0] * 11 + [0.0] * 89,  # 11.0: exactly the tolerance away
    "consistent": [1.0] + [0.0] * 4,  # 20.0 over five samples: the interval holds 10.0
    "not reproduced": [1.0] * 60 + [0.0] * 40,  # 60.0 over a hundred: the interval excludes it
}


@pytest.mark.parametrize("state", list(STATE_SCORES))
def test_each_state_is_rendered_in_html_and_latex(
    state: str,
    specs_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paths = write_scores(specs_dir)
    for task, (group, _, _) in TASKS.items():
        scores = STATE_SCORES[state] if group is Group.T1 else [0.0, 1.0]
        rows = [
            Judgment(task=task, mode=Mode.MULTI_IMAGE, model="random", sample_id=i, scorer="paper",
                     status="scored", score=score, image_quantity_level="Few").model_dump(mode="json")
            for i, score in enumerate(scores)
        ]  # fmt: skip
        atomic_write_jsonl(paths.judgments("random", task, Mode.MULTI_IMAGE), rows)
    reports = run_report(specs_dir, tmp_path, monkeypatch)

    html = reports.report_html.read_text(encoding="utf-8")
    cell = re.search(r'<tr data-model="random" data-column="T-1">(.*?)</tr>', html, re.S)
    assert cell and f'data-status="{state}">{state}</td>' in cell.group(1)
    columns = re.search(r'<table class="verdict-summary" id="verdict-columns">(.*?)</table>', html, re.S)
    assert columns
    t1 = re.search(r'<tr data-column="T-1">(.*?)</tr>', columns.group(1), re.S)
    assert t1 and f'data-status="{state}">{state}</td>' in t1.group(1)
    assert 'id="verdict-summary"' in html and "consistent (outside the tolerance" in html

    tex = reports.report_tex.read_text(encoding="utf-8")
    shown = r"\textbf{not reproduced}" if state == "not reproduced" else state
    assert re.search(rf"^Random & T-1 & 10\.0 & .* & {re.escape(shown)} \\\\$", tex, re.M), tex
    assert re.search(rf"^T-1 & {re.escape(shown)} & ", tex, re.M)


def test_standing_puts_incomplete_first_when_most_cells_have_no_score() -> None:
    """Half the cells scored is not "most unscored": the scored cells decide; below half, incomplete."""
    ok, near, far, none = (Agreement.REPRODUCED, Agreement.CONSISTENT, Agreement.NOT_REPRODUCED,
                           Agreement.NO_SCORE)  # fmt: skip
    assert summarise_agreement([far, ok, none, none]).standing is Standing.NOT_REPRODUCED
    assert summarise_agreement([far, none, none]).standing is Standing.INCOMPLETE
    assert summarise_agreement([ok, ok, ok, none]).standing is Standing.INCOMPLETE
    assert summarise_agreement([ok, near]).standing is Standing.CONSISTENT
    assert summarise_agreement([ok, Agreement.RULE]).standing is Standing.REPRODUCED
    assert summarise_agreement([none]).standing is Standing.INCOMPLETE
    assert summarise_agreement([]).standing is Standing.INCOMPLETE


def test_a_mostly_unscored_table_leads_with_incomplete_and_its_rows_agree(paper: PaperSpec, tasks) -> None:
    """One model with only its T-1 tasks scored, one with nothing: one cell of the table is scored."""
    t1 = {t.name: s for t, s in zip(tasks, samples_for(paper, tasks, "vila").values(), strict=True)
          if t.group is Group.T1}  # fmt: skip
    models = ("vila", "mantis")
    verdict = build_verdict(run(models), paper, tasks, {"vila": t1}, resamples=50)
    view = build_verdict_view(run(models), paper, list(load_specs(SPECS).run_models(run(models))), verdict)
    assert view is not None
    total = len(models) * len(COLUMNS)
    assert view.headline("1.0") == f"incomplete: 1 of {total} cells scored (the scored ones: reproduced)"
    assert view.table.state is Standing.INCOMPLETE and not view.all_pass
    # T-1 has one of its two cells scored, the other columns none: each column reads incomplete too.
    assert {s.state for s in view.summary} == {Standing.INCOMPLETE}


def test_an_unscored_table_reads_incomplete_in_the_headline_and_the_closing_sentence(
    specs_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every multi-image score of the run's one published model is absent: the headline, the closing
    sentence and the whole table's row all say incomplete, never a state of cells that have none."""
    paths = write_scores(specs_dir)
    for task in TASKS:
        paths.judgments("random", task, Mode.MULTI_IMAGE).unlink()
        paths.task_score("random", task, Mode.MULTI_IMAGE).unlink()
    allow_incomplete(specs_dir)
    read_data_elsewhere(specs_dir, tmp_path)
    reports = run_report(specs_dir, tmp_path, monkeypatch)
    html = reports.report_html.read_text(encoding="utf-8")
    headline = re.search(
        r'<p id="verdict-summary" class="verdict-open" data-status="([^"]+)">(.*?)</p>', html, re.S
    )
    assert headline and headline.group(1) == "incomplete"
    total = len(COLUMNS)  # one model of the run has a published row
    assert (
        f"<strong>Verdict against the paper: incomplete: 0 of {total} cells scored.</strong>"
        in headline.group(2)
    )
    closing = re.findall(
        r'The whole table: <span class="state-[^"]+" data-status="([^"]+)">', headline.group(2)
    )
    assert closing == ["incomplete"]
    table = re.search(r'<tr data-column="table" class="total">(.*?)</tr>', html, re.S)
    assert table and 'data-status="incomplete">incomplete</td>' in table.group(1)
    tex = reports.report_tex.read_text(encoding="utf-8")
    assert rf"\textbf{{Verdict against the paper: incomplete: 0 of {total} cells scored.}}" in tex
    assert r"The whole table: \emph{incomplete}" in tex
