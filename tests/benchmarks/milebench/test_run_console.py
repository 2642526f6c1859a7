"""The console of a Snakemake run: the run's progress (samples answered, rate, ETA) counted from the infer
jobs' journals and predictions, and the last message naming the report and its headline verdict."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_report import read_data_elsewhere, run_report, specs_dir, write_scores  # noqa: F401

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import cells
from milebench.benchmarks.milebench.run_console import RunProgress, duration, finished_message
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.samples import expected_samples

SPECS = load_specs()
RUN = SPECS.run("smoke")


def answers(path: Path, ids: list[int]) -> None:
    """A journal or predictions file answering ``ids`` (one line each; a repeated id repeats a line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"sample_id": i, "response": "A"}) + "\n" for i in ids))


def test_progress_counts_each_cells_answers_once_at_most_its_samples(tmp_path: Path) -> None:
    paths = RunPaths.for_run(RUN, tmp_path)
    every = cells(SPECS, RUN)
    expected = {c: expected_samples(SPECS.tasks[c.task], RUN) for c in every}
    total = sum(expected.values())
    finished, running, overfull, both = every[:4]
    assert {expected[c] for c in (finished, running, overfull, both)} == {3}, "the smoke fixture's count"
    answers(paths.predictions(*finished), [0, 1, 2])
    now = [0.0]
    progress = RunProgress(SPECS, RUN, paths, clock=lambda: now[0])
    assert progress.total == total
    now[0] = 100.0  # the run before its first answer (fetch, preprocessing) does not count in the rate
    assert progress.line() == f"progress: 3 of {total} samples answered ({100 * 3 / total:.0f}%)"

    answers(paths.journal(*running), [0, 1, 1])  # a repeated line is one sample
    answers(paths.journal(*overfull), [0, 1, 2, 3, 4])  # a stale journal counts the cell's 3 at most
    answers(paths.predictions(*both), [0, 1, 2])  # a finished cell: its predictions, not its journal
    answers(paths.journal(*both), [0])
    now[0] = 110.0
    done = 3 + 2 + 3 + 3
    rate = (done - 3) / 10.0
    assert progress.line() == (
        f"progress: {done} of {total} samples answered ({100 * done / total:.0f}%), 0.80 samples/s, "
        f"ETA {duration((total - done) / rate)}"
    )

    answers(paths.journal(*running), [0, 1, 2])  # a file that changed is read again
    assert progress.done() == done + 1


def test_progress_of_a_run_with_a_limit_counts_the_limit() -> None:
    run = RUN.model_copy(update={"limit": 2})
    progress = RunProgress(SPECS, run, RunPaths(out=Path("/nonexistent"), reports=Path("/nonexistent")))
    assert progress.total == 2 * len(cells(SPECS, run)) and progress.done() == 0


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.2, "1 s"), (59.0, "59 s"), (59.5, "1 min"), (60.0, "1 min"), (61.0, "2 min"), (3599.0, "1 h 00 min"),
     (3601.0, "1 h 01 min"), (3 * 3600 + 5 * 60, "3 h 05 min")],
)  # fmt: skip
def test_an_eta_is_rounded_up(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_the_last_message_names_the_report_and_its_headline(
    specs_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_scores(specs_dir)
    before = time.time() - 1
    html = run_report(specs_dir, tmp_path, monkeypatch).report_html
    headline = "Pipeline check on fixture data: every sample answered and scored."  # fixture data
    assert finished_message(html, before) == f"report: {html}\n{headline}"
    assert finished_message(html, time.time() + 60) == f"report: {html} (not rebuilt by this run)\n{headline}"
    read_data_elsewhere(specs_dir, tmp_path)  # the same scores on real data: the verdict is the headline
    html = run_report(specs_dir, tmp_path, monkeypatch).report_html
    verdict = "Verdict against the paper: not reproduced within ±1.0 points."
    assert finished_message(html, before) == f"report: {html}\n{verdict}"


def test_a_report_without_a_verdict_or_no_report_is_said(tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    assert "no report yet at" in finished_message(html, 0.0)
    html.write_text('<p class="banner" id="subset">Subset: <strong>no verdict</strong></p>')
    assert finished_message(html, 0.0) == f"report: {html}\nThe report gives no verdict against the paper."
