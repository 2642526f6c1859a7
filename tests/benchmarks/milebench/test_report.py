"""``milebench report`` renders the paper's tables from the run's aggregate and task scores, escaped for
HTML and LaTeX."""

from __future__ import annotations

import argparse
import json
import logging
import re
from pathlib import Path

import pytest
import yaml

from milebench import cli
from milebench.benchmarks.milebench.paths import UNLIMITED_REGIME, RunPaths
from milebench.benchmarks.milebench.plan import cells as plan_cells
from milebench.benchmarks.milebench.preprocess.prepare import PrepareManifest, SkippedSample
from milebench.benchmarks.milebench.preprocess.regime import UNLIMITED
from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.report.commands import ScoreFileError, report
from milebench.benchmarks.milebench.score.aggregate import summarise
from milebench.benchmarks.milebench.score.run_aggregate import aggregate
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.benchmarks.milebench.spec.samples import expected_samples
from milebench.benchmarks.milebench.spec.task import (
    GROUP_CATEGORY,
    Group,
    Metric,
    QuestionType,
    ScorerKind,
    TaskSpec,
)
from milebench.infer.records import FailureKind
from milebench.io import atomic_write_json, atomic_write_jsonl
from milebench.report.render import latex_escape
from milebench.spec.base import Spec
from milebench.spec.model import BuiltinModel, ModelSpec, Section

EVIL = 'Evil <script>alert("x")</script> & my_model 50% #1'
# task -> (group, multi-image score of "random", of "evil")
TASKS: dict[str, tuple[Group, float, float]] = {
    "ActionSequence": (Group.T1, 40.0, 10.0),
    "ActionPrediction": (Group.T1, 60.0, 20.0),
    "ObjectExistence": (Group.T2, 31.25, 30.0),
    "MovingDirection": (Group.T3, 25.0, 40.0),
    "StateChange": (Group.T4, 30.0, 50.0),
    "WebQA": (Group.S1, 26.0, 60.0),
    "DocVQA": (Group.S2, 24.0, 70.0),
    "Spot-the-Diff": (Group.S3, 5.0, 80.0),
    "MMCoQA": (Group.S4, 25.0, 90.0),
    "nuscenes": (Group.S5, 12.0, 15.0),
    "TextNeedleInAHaystack": (Group.N1, 0.0, 25.0),
    "ImageNeedleInAHaystack": (Group.N2, 3.0, 35.0),
    "GPR1200": (Group.I1, 11.4, 45.0),
}
PAPER_RANDOM = {g.value: 10.0 + i for i, g in enumerate(Group)}


def dump(path: Path, data: Spec | dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.model_dump(mode="json") if isinstance(data, Spec) else data
    path.write_text(yaml.safe_dump(payload, sort_keys=False, allow_unicode=True), encoding="utf-8")


def task_spec(name: str, group: Group) -> TaskSpec:
    open_ended = name in ("Spot-the-Diff", "MMCoQA") or "Needle" in name
    qtype = QuestionType.OPEN_ENDED if open_ended else QuestionType.MULTI_CHOICE
    scorer = {
        "Spot-the-Diff": ScorerKind.ROUGE_L,
        "MMCoQA": ScorerKind.SUBSTRING,
    }.get(name, ScorerKind.NEEDLE if "Needle" in name else ScorerKind.CHOICE)
    return TaskSpec(
        name=name, display_name=name, group=group, group_name="g", category=GROUP_CATEGORY[group],
        question_type=qtype, metric=Metric.ROUGE_L if scorer is ScorerKind.ROUGE_L else Metric.ACCURACY,
        scorer=scorer, n_samples=3, has_adversarial=GROUP_CATEGORY[group].value != "diagnostic",
        source_dataset=name,
    )  # fmt: skip


@pytest.fixture
def specs_dir(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    for name, (group, _, _) in TASKS.items():
        dump(root / "tasks" / f"{name}.yaml", task_spec(name, group))
    for name, display, section in (("random", "Random", Section.BASELINE), ("evil", EVIL, Section.KIT)):
        spec = ModelSpec(
            name=name, display_name=display, section=section, adapter="random",
            weights=BuiltinModel(kind="builtin"), size="7B" if name == "evil" else None,
        )  # fmt: skip
        dump(root / "models" / f"{name}.yaml", spec)
    run = RunSpec(
        name="t", description="test run", models=("random", "evil"),
        modes=(Mode.MULTI_IMAGE, Mode.ADVERSARIAL), data=FixtureSource(kind="fixture"),
        output_dir=str(tmp_path / "out"),
    )  # fmt: skip
    dump(root / "runs" / "t.yaml", run)
    paper = {
        "source": "Test source, arXiv:0000.00000",
        "main_table": {
            "caption": "Main table caption.",
            "footnotes": {"random": "A footnote about 100% & more."},
            "rows": [
                {
                    "paper_name": "Random",
                    "model": "random",
                    "section": "baseline",
                    "size": None,
                    "groups": PAPER_RANDOM,
                    "overall_real": 22.3,
                    "overall_diag": 5.5,
                }
            ],
            "inconsistencies": [
                {"model": "random", "column": "overall_real", "printed": 22.3, "computed": 20.94, "note": "n"}
            ],
        },
        "contamination": {
            "caption": "c",
            "rows": [{"model": "random", "regular": 22.3, "adv": 21.0, "delta": 1.3}],
        },
        "image_quantity": {"note": "n", "rows": []},
    }
    dump(root / "paper.yaml", paper)
    return root


def write_cell(paths: RunPaths, task: str, model: str, mode: Mode, value: float, n_failed: int = 0) -> None:
    """Three judgments whose mean (failed samples as 0) is ``value``, and their task score as ``milebench
    score`` summarises them; failed samples first, out of memory."""
    n = 3
    rows = [
        Judgment(task=task, mode=mode, model=model, sample_id=i, scorer="paper", status="failed",
                 failure=FailureKind.OOM, image_quantity_level="Few")
        if i < n_failed
        else Judgment(task=task, mode=mode, model=model, sample_id=i, scorer="paper", status="scored",
                      score=value * n / (n - n_failed) / 100, image_quantity_level="Few")
        for i in range(n)
    ]  # fmt: skip
    atomic_write_jsonl(paths.judgments(model, task, mode), [j.model_dump(mode="json") for j in rows])
    score = summarise(task, model, mode, "paper", rows)
    atomic_write_json(paths.task_score(model, task, mode), score.model_dump(mode="json"))


def write_scores(specs_dir: Path, skip: tuple[str, str, Mode] | None = None, failed: int = 0) -> RunPaths:
    run = RunSpec.model_validate(yaml.safe_load((specs_dir / "runs" / "t.yaml").read_text()))
    paths = RunPaths.for_run(run)
    for name, (group, random_score, evil_score) in TASKS.items():
        for model, value in (("random", random_score), ("evil", evil_score)):
            for mode in run.modes:
                if mode is Mode.ADVERSARIAL and GROUP_CATEGORY[group].value == "diagnostic":
                    continue
                if (model, name, mode) == skip:
                    continue
                n_failed = failed if (model, name) == ("evil", "ActionSequence") else 0
                adv_shift = 1.0 if mode is Mode.ADVERSARIAL else 0.0
                write_cell(paths, name, model, mode, value - adv_shift, n_failed)
    return paths


def allow_incomplete(specs_dir: Path) -> None:
    """Set ``allow_incomplete: true`` in the test run spec."""
    path = specs_dir / "runs" / "t.yaml"
    dump(path, {**yaml.safe_load(path.read_text(encoding="utf-8")), "allow_incomplete": True})


def aggregate_and_report(specs_dir: Path, run: str = "t") -> int:
    """``milebench aggregate`` then, when it succeeds, ``milebench report``, as the DAG runs them."""
    return aggregate(
        argparse.Namespace(run=run, specs=specs_dir, root=Path("."), resamples=200, seed=0)
    ) or report(argparse.Namespace(run=run, specs=specs_dir, root=Path(".")))


def run_report(specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunPaths:
    monkeypatch.chdir(tmp_path)
    assert aggregate_and_report(specs_dir) == 0
    run = RunSpec.model_validate(yaml.safe_load((specs_dir / "runs" / "t.yaml").read_text()))
    return RunPaths.for_run(run)


def main_cells(html: str, mode: Mode, model: str) -> dict[str, tuple[str, str | None]]:
    """column -> (our value, paper value) of one model's row in one mode's main table."""
    table = re.search(rf'<table class="main" id="main-{mode.value}">(.*?)</table>', html, re.S)
    assert table
    row = re.search(rf'<tr data-model="{model}">(.*?)</tr>', table.group(1), re.S)
    assert row
    cells = re.findall(
        r'<td data-column="([^"]+)"><span class="ours">([^<]*)</span>(?:<span class="paper[^"]*">([^<]*))?',
        row.group(1),
    )
    return {column: (ours, paper or None) for column, ours, paper in cells}


def expected_groups(index: int) -> dict[str, float]:
    sums: dict[Group, list[float]] = {}
    for group, *scores in TASKS.values():
        sums.setdefault(group, []).append(scores[index])
    groups = {g.value: sum(v) / len(v) for g, v in sums.items()}
    real = [groups[g] for g in ("T-1", "T-2", "T-3", "T-4", "S-1", "S-2", "S-3", "S-4", "S-5")]
    diag = [groups[g] for g in ("N-1", "N-2", "I-1")]
    return {**groups, "overall_real": sum(real) / 9, "overall_diag": sum(diag) / 3}


def test_main_table_cells_equal_the_aggregated_scores(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_scores(specs_dir)
    paths = run_report(specs_dir, tmp_path, monkeypatch)
    html = paths.report_html.read_text(encoding="utf-8")
    for index, model in enumerate(("random", "evil")):
        cells = main_cells(html, Mode.MULTI_IMAGE, model)
        expected = expected_groups(index)
        assert list(cells) == [*(g.value for g in Group), "overall_real", "overall_diag"]
        assert {k: ours for k, (ours, _) in cells.items()} == {k: f"{v:.1f}" for k, v in expected.items()}
    assert main_cells(html, Mode.MULTI_IMAGE, "random")["T-1"] == ("50.0", "10.0")
    assert main_cells(html, Mode.MULTI_IMAGE, "random")["overall_real"][1] == "22.3&dagger;"
    assert main_cells(html, Mode.MULTI_IMAGE, "evil")["T-1"] == ("15.0", None)
    adversarial = main_cells(html, Mode.ADVERSARIAL, "random")
    assert adversarial["T-2"] == ("30.2", None)
    assert adversarial["overall_diag"] == ("\u2013", None)
    assert "Incomplete" not in html

    tex = paths.report_tex.read_text(encoding="utf-8")
    random_row = next(line for line in tex.splitlines() if line.startswith("Random & "))
    expected = expected_groups(0)
    assert random_row.removesuffix(" \\\\").split(" & ")[2:] == [f"{v:.1f}" for v in expected.values()]


def test_html_is_self_contained_and_escapes_display_names(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_scores(specs_dir)
    html = run_report(specs_dir, tmp_path, monkeypatch).report_html.read_text(encoding="utf-8")
    assert "<script" not in html
    escaped = "Evil &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; my_model 50% #1"
    for mode in (Mode.MULTI_IMAGE, Mode.ADVERSARIAL):
        table = re.search(rf'<table class="main" id="main-{mode.value}">(.*?)</table>', html, re.S)
        assert table
        assert f'<tr data-model="evil">\n<th scope="row">{escaped}</th>' in table.group(1)
    # Under the main table of the paper mode and in the notes.
    assert html.count('<p class="note">Random: A footnote about 100% &amp; more.</p>') == 2
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "<link" not in html and "@import" not in html


def test_latex_escapes_data_strings(specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_scores(specs_dir)
    tex = run_report(specs_dir, tmp_path, monkeypatch).report_tex.read_text(encoding="utf-8")
    assert r"my\_model 50\% \#1" in tex
    assert r"Evil \textless{}script\textgreater{}" in tex
    assert r"\& my\_model" in tex
    assert r"A footnote about 100\% \& more." in tex
    assert "\\begin{tabular}" in tex and "\\toprule" in tex and "\\bottomrule" in tex
    assert not re.search(r"\\begin\{tabular\}\{[^}]*\|", tex), "no vertical rules"
    assert "\\hline" not in tex


def test_latex_escape_filter() -> None:
    assert latex_escape("a_b & 5% #1 {x} ~ ^ \\") == (
        r"a\_b \& 5\% \#1 \{x\} \textasciitilde{} \textasciicircum{} \textbackslash{}"
    )


def test_coverage_shows_missing_task_and_failed_samples(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_scores(specs_dir, skip=("random", "WebQA", Mode.MULTI_IMAGE), failed=2)
    allow_incomplete(specs_dir)
    paths = run_report(specs_dir, tmp_path, monkeypatch)
    html = paths.report_html.read_text(encoding="utf-8")
    assert "Incomplete" in html
    cells = main_cells(html, Mode.MULTI_IMAGE, "random")
    assert cells["S-1"][0] == "\u2013" and cells["overall_real"][0] == "\u2013"
    assert cells["N-1"][0] == "0.0"
    # Coverage beside each number resting on fewer samples than expected, and only there.
    main = re.search(r'<table class="main" id="main-multi-image">(.*?)</table>', html, re.S)
    assert main
    evil = re.search(r'<tr data-model="evil">(.*?)</tr>', main.group(1), re.S)
    assert evil
    shares = dict(
        re.findall(
            r'<td data-column="([^"]+)">.*?<span class="coverage"[^>]*>cov\. ([^<]*)</span>', evil.group(1)
        )
    )
    assert shares == {"T-1": "66.7%", "overall_real": "93.3%"}  # ActionSequence: 1 of 3 scored
    assert 'class="coverage"' not in re.search(
        r'<tr data-model="random">(.*?)</tr>', main.group(1), re.S
    ).group(1)
    coverage = re.search(r'<table class="coverage" id="coverage-multi-image">(.*?)</table>', html, re.S)
    assert coverage
    random_row = re.search(r'<tr data-model="random">(.*?)</tr>', coverage.group(1), re.S)
    evil_row = re.search(r'<tr data-model="evil">(.*?)</tr>', coverage.group(1), re.S)
    assert random_row and evil_row
    assert "<td>12/13</td>" in random_row.group(1)
    assert '<td data-column="failed">2</td>' in evil_row.group(1)
    assert '<td data-column="missing">0</td>' in evil_row.group(1)
    tasks = re.search(r'<table class="tasks" id="tasks-multi-image">(.*?)</table>', html, re.S)
    assert tasks
    assert re.search(
        r'<tr data-task="WebQA">.*?<td data-model="random"[^>]*>missing</td>', tasks.group(1), re.S
    )
    assert re.search(
        r'<tr data-task="ActionSequence">.*?<td data-model="evil"[^>]*>10\.0'
        r'<span class="cell-coverage">1/3 scored',
        tasks.group(1),
        re.S,
    )
    tex = paths.report_tex.read_text(encoding="utf-8")
    evil_row = next(line for line in tex.splitlines() if line.startswith("Evil "))
    assert r"15.0\,{\tiny 66.7\%}" in evil_row
    assert r"10.0\,{\tiny 1/3}" in tex


def test_incomplete_run_is_refused_unless_the_run_spec_allows_it(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_scores(specs_dir, skip=("random", "WebQA", Mode.MULTI_IMAGE), failed=2)
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.ERROR):
        assert report(argparse.Namespace(run="t", specs=specs_dir, root=Path("."))) == 1
    message = caplog.text
    assert f"{specs_dir / 'runs' / 't.yaml'}: allow_incomplete" in message
    assert "`allow_incomplete: true`" in message
    assert "3 incomplete cell(s)" in message
    assert "random/multi-image/WebQA: no task score file" in message
    assert (
        "evil/multi-image/ActionSequence: failed samples [0, 1] (oom: 2); 0 missing, 2 failed of 3" in message
    )
    assert "evil/adversarial/ActionSequence: failed samples [0, 1]" in message
    assert "evil/multi-image/ActionPrediction" not in message
    run = RunSpec.model_validate(yaml.safe_load((specs_dir / "runs" / "t.yaml").read_text()))
    assert not RunPaths.for_run(run).report_html.exists()
    allow_incomplete(specs_dir)
    assert aggregate_and_report(specs_dir) == 0
    assert RunPaths.for_run(run).report_html.exists()


def test_report_names_a_malformed_score_file(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write_scores(specs_dir)
    bad = paths.task_score("evil", "DocVQA", Mode.MULTI_IMAGE)
    bad.write_text('{"task": "DocVQA"}', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScoreFileError, match=re.escape(str(bad))):
        report(argparse.Namespace(run="t", specs=specs_dir, root=Path(".")))


def manifest(
    task: str, mode: Mode, skipped: tuple[SkippedSample, ...], truncated: int = 0
) -> PrepareManifest:
    return PrepareManifest(
        task=task, mode=mode, regime_id=UNLIMITED_REGIME, regime=UNLIMITED, models=("random", "evil"),
        source=f"MileBench/{task}/{task}.json", source_sha256="0" * 64, n_samples=3,
        n_prepared=3 - len(skipped), skipped=skipped, n_truncated=truncated, images_kept=6,
        images_dropped_budget=2 * truncated, images_unpaired=1, kit_pictures=0,
    )  # fmt: skip


def test_skipped_samples_are_shown_per_task_and_regime_with_reasons(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write_scores(specs_dir)
    reasons = (
        SkippedSample(sample_id=7, error="MileBench/WebQA/images/7_0.jpg: Pillow cannot open image <bad>"),
        SkippedSample(sample_id=9, error="task_instruction_id 99 is out of range"),
    )
    for task in TASKS:
        skipped = reasons if task == "WebQA" else ()
        record = manifest(task, Mode.MULTI_IMAGE, skipped, truncated=int(task == "DocVQA"))
        atomic_write_json(paths.prepared_manifest(task, Mode.MULTI_IMAGE), record.model_dump(mode="json"))
    html = run_report(specs_dir, tmp_path, monkeypatch).report_html.read_text(encoding="utf-8")

    summary = re.search(r'<table class="skipped" id="skipped-summary-multi-image">(.*?)</table>', html, re.S)
    assert summary
    row = re.search(rf'<tr data-regime="{UNLIMITED_REGIME}">(.*?)</tr>', summary.group(1), re.S)
    assert row
    assert "Random, Evil &lt;script&gt;" in row.group(1)
    # 13 manifests: 39 samples, 37 prepared, 2 skipped, 1 truncated, 2 images dropped, 13 unpaired.
    assert re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))[1:] == [
        "13/13",
        "39",
        "37",
        "2",
        "1",
        "2",
        "13",
    ]
    samples = re.search(
        r'<table class="skipped-samples" id="skipped-samples-multi-image">(.*?)</table>', html, re.S
    )
    assert samples
    listed = re.findall(
        r'<tr data-regime="full" data-task="([^"]+)" data-sample="(\d+)">(.*?)</tr>', samples.group(1), re.S
    )
    assert [(task, sample) for task, sample, _ in listed] == [("WebQA", "7"), ("WebQA", "9")]
    assert "2/3" in listed[0][2] and "Pillow cannot open image &lt;bad&gt;" in listed[0][2]
    assert "task_instruction_id 99 is out of range" in listed[1][2]
    # The adversarial mode has no manifests: shown as not recorded, not as zero skipped.
    adversarial = re.search(
        r'<table class="skipped" id="skipped-summary-adversarial">(.*?)</table>', html, re.S
    )
    assert adversarial and "0/10" in adversarial.group(1) and "not recorded" in adversarial.group(1)

    tex = (paths.reports / "report.tex").read_text(encoding="utf-8")
    assert "Skipped samples (multi-image) with the reason for each." in tex
    assert r"Pillow cannot open image \textless{}bad\textgreater{}" in tex
    assert re.search(r"WebQA & 2/3 & 7 & ", tex)


def test_contamination_table_pairs_regular_and_adversarial(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_scores(specs_dir)
    html = run_report(specs_dir, tmp_path, monkeypatch).report_html.read_text(encoding="utf-8")
    section = re.search(r'<section id="contamination">(.*?)</section>', html, re.S)
    assert section
    row = re.search(r'<tr data-model="random">(.*?)</tr>', section.group(1), re.S)
    assert row
    regular = expected_groups(0)["overall_real"]
    values = re.findall(r"<td>([^<]*)</td>", row.group(1))
    assert values == [f"{regular:.1f}", f"{regular - 1:.1f}", "1.0", "22.3", "21.0", "1.3"]


def test_the_report_shows_the_aggregates_numbers_and_computes_none(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups, overall columns and verdict come from aggregate.json and verdict.json as written: a value
    changed there (and only there) is the value the report shows."""
    paths = write_scores(specs_dir)
    monkeypatch.chdir(tmp_path)
    assert aggregate(argparse.Namespace(run="t", specs=specs_dir, root=Path("."), resamples=200, seed=0)) == 0
    data = json.loads(paths.aggregate_json.read_text(encoding="utf-8"))
    random = next(m for m in data["models"] if (m["model"], m["mode"]) == ("random", "multi-image"))
    random["columns"]["T-1"]["value"] = 77.7
    random["columns"]["overall_diag"]["value"] = 66.6
    atomic_write_json(paths.aggregate_json, data)
    verdict = json.loads(paths.verdict_json.read_text(encoding="utf-8"))
    cell = next(c for c in verdict["cells"] if (c["model"], c["column"]) == ("random", "S-2"))
    cell["ours"] = 55.5
    atomic_write_json(paths.verdict_json, verdict)
    assert report(argparse.Namespace(run="t", specs=specs_dir, root=Path("."))) == 0
    html = paths.report_html.read_text(encoding="utf-8")
    cells = main_cells(html, Mode.MULTI_IMAGE, "random")
    assert cells["T-1"][0] == "77.7" and cells["overall_diag"][0] == "66.6"
    row = re.search(r'<tr data-model="random" data-column="S-2">(.*?)</tr>', html, re.S)
    assert row and "55.5" in row.group(1)


def test_report_without_its_aggregate_names_the_command_that_writes_it(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    paths = write_scores(specs_dir)
    monkeypatch.chdir(tmp_path)
    argv = ["--specs", str(specs_dir), "report", "--run", "t"]
    with caplog.at_level(logging.ERROR):
        assert cli.main(argv) == 1
    assert (
        f"{paths.aggregate_json}: run aggregate not found; run `milebench aggregate --run t` first"
        in caplog.text
    )
    # An aggregate of an earlier run spec (another model list) is refused, not rendered.
    assert aggregate(argparse.Namespace(run="t", specs=specs_dir, root=Path("."), resamples=10, seed=0)) == 0
    data = json.loads(paths.aggregate_json.read_text(encoding="utf-8"))
    data["models"] = [m for m in data["models"] if m["model"] != "evil"]
    atomic_write_json(paths.aggregate_json, data)
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert cli.main(argv) == 1
    assert f"{paths.aggregate_json}: " in caplog.text and "evil/multi-image" in caplog.text
    assert "run `milebench aggregate --run t` again" in caplog.text
    assert not paths.report_html.exists()


def read_data_elsewhere(specs_dir: Path, tmp_path: Path) -> None:
    """Point the test run at an extracted data tree instead of the generated fixture."""
    path = specs_dir / "runs" / "t.yaml"
    data = {"kind": "local", "path": str(tmp_path / "MileBench")}
    dump(path, {**yaml.safe_load(path.read_text(encoding="utf-8")), "data": data})


def test_fixture_data_opens_with_a_pipeline_check_and_real_data_with_the_verdict(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the fixture the headline is the pipeline check (every sample answered and scored, counted), the
    verdict kept further down and marked as meaning nothing; the same scores on real data open red."""
    write_scores(specs_dir)
    specs = load_specs(specs_dir)
    run = specs.run("t")
    cells = plan_cells(specs, run)
    samples = sum(expected_samples(specs.tasks[c.task], run) for c in cells)
    html = run_report(specs_dir, tmp_path, monkeypatch).report_html.read_text(encoding="utf-8")
    head, body = html.split("<nav>", 1)
    check = re.search(r'<p id="pipeline-check" class="check" data-passed="true">(.*?)</p>', head, re.S)
    assert check, head
    assert "every sample answered and scored" in check.group(1)
    assert f"{samples} of {samples} expected samples scored over {len(cells)} cells" in check.group(1)
    assert "0 missing, 0 failed" in check.group(1) and "mean nothing" in check.group(1)
    assert 'class="verdict-no"' not in html and "Verdict against the paper:" not in head
    verdict = re.search(r'<section id="verdict">(.*?)</section>', body, re.S)
    assert verdict and "on fixture data, means nothing" in verdict.group(1)
    assert 'class="verdict-fixture"' in verdict.group(1)
    assert 'data-status="not reproduced"' in verdict.group(1)  # the table itself is kept
    tex_text = RunPaths.for_run(run).report_tex.read_text(encoding="utf-8")
    opening = tex_text.split(r"\begin{table}", 1)[0]
    assert r"\textbf{Pipeline check on fixture data: every sample answered and scored.}" in opening
    assert "Verdict against the paper" not in opening
    assert r"\paragraph{On fixture data, this verdict means nothing.}" in tex_text

    read_data_elsewhere(specs_dir, tmp_path)
    html = run_report(specs_dir, tmp_path, monkeypatch).report_html.read_text(encoding="utf-8")
    head = html.split("<nav>", 1)[0]
    assert 'id="pipeline-check"' not in html and "means nothing" not in html
    headline = '<p id="verdict-summary" class="verdict-no" data-status="not reproduced"><strong>Verdict'
    assert f"{headline} against the paper: not reproduced" in head
    tex_text = RunPaths.for_run(run).report_tex.read_text(encoding="utf-8")
    assert "Pipeline check" not in tex_text
    assert r"\textbf{Verdict against the paper: not reproduced" in tex_text.split(r"\begin{table}", 1)[0]


def test_a_fixture_run_with_failed_samples_fails_its_pipeline_check(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_scores(specs_dir, failed=2)
    allow_incomplete(specs_dir)
    html = run_report(specs_dir, tmp_path, monkeypatch).report_html.read_text(encoding="utf-8")
    check = re.search(r'<p id="pipeline-check" class="banner" data-passed="false">(.*?)</p>', html, re.S)
    assert check and "not every sample answered and scored" in check.group(1)
    # ActionSequence of "evil" failed 2 samples in each of the run's two modes.
    assert "0 missing, 4 failed" in check.group(1)


def test_sections_with_nothing_to_say_fold_away(
    specs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One published model ranks nothing (every correlation a dash) and a baseline and a kit model have
    no execution to match (every fidelity cell "not applicable"): neither section is in the report."""
    write_scores(specs_dir)
    paths = run_report(specs_dir, tmp_path, monkeypatch)
    verdict = json.loads(paths.verdict_json.read_text(encoding="utf-8"))
    assert verdict["rank_correlations"] and all(rc["rho"] is None for rc in verdict["rank_correlations"])
    html = paths.report_html.read_text(encoding="utf-8")
    assert 'id="verdict-cells"' in html
    assert '<table class="ranks">' not in html and "Ranking of models" not in html
    assert 'id="fidelity"' not in html and 'href="#fidelity"' not in html
    tex = paths.report_tex.read_text(encoding="utf-8")
    assert "Ranking of models" not in tex and "Execution fidelity" not in tex
