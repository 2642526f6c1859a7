"""The report with real tools: figures, needle grids and truncation from per-sample records, the LaTeX
compiled by latexmk, the HTML opened in headless Chromium (console errors and images checked over CDP)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from test_report import EVIL, TASKS, aggregate_and_report, dump, task_spec

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.prepare import PrepareManifest, SkippedSample
from milebench.benchmarks.milebench.preprocess.regime import UNLIMITED
from milebench.benchmarks.milebench.records import Judgment, PreparedSample, TruncationRecord
from milebench.benchmarks.milebench.report.commands import gather
from milebench.benchmarks.milebench.report.needle import N_DEPTHS, needle_grid
from milebench.benchmarks.milebench.report.tables import Report
from milebench.benchmarks.milebench.report.truncation import seen_share
from milebench.benchmarks.milebench.score.aggregate import LevelScore, TaskScore, VariantScore
from milebench.benchmarks.milebench.score.run_aggregate import write_aggregate
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.benchmarks.milebench.spec.task import Group, QuestionType
from milebench.io import atomic_write_json, atomic_write_jsonl
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.model import BuiltinModel, ModelSpec, Section

MODES = (Mode.MULTI_IMAGE, Mode.COMBINED_IMAGE, Mode.ADVERSARIAL)
NEEDLE_LENGTHS = (4, 8, 12)


def needle_sample(task: str, group: Group, sample_id: int, length: int, depth: int) -> PreparedSample:
    """A full-context needle sample; N-1 hides the answer at ``depth``/10 of the text, N-2 in an image."""
    words = [f"w{i}" for i in range(length * 10)]
    if group is Group.N1:
        words[depth * length] = "zebra"
    return PreparedSample(
        task=task,
        mode=Mode.MULTI_IMAGE,
        sample_id=sample_id,
        instruction="Find the code word.",
        context=" ".join(words),
        images=tuple(f"{task}/images/{sample_id}_{k}.jpg" for k in range(length)),
        image_sha256=tuple("0" * 64 for _ in range(length)),
        prompt_sha256="0" * 64,
        question_type=QuestionType.OPEN_ENDED,
        choices=None,
        response="zebra",
        image_quantity_level="Medium",
        n_images=length,
        truncation=TruncationRecord(
            mode=None, images_total=length, images_kept=length, pieces_total=1, pieces_kept=1
        ),
    )


def judgment(
    task: str, model: str, mode: Mode, sample_id: int, score: float, scorer: str = "paper"
) -> Judgment:
    return Judgment(
        task=task,
        mode=mode,
        model=model,
        sample_id=sample_id,
        scorer=scorer,
        status="scored",
        score=score,
        image_quantity_level="Medium",
    )


def build_run(root: Path) -> tuple[Path, RunPaths]:
    """Specs and every per-sample file of a run with a hostile model name, in the three modes."""
    specs_dir = root / "specs"
    for name, (group, _, _) in TASKS.items():
        dump(specs_dir / "tasks" / f"{name}.yaml", task_spec(name, group))
    for name, display, section in (
        ("random", "Random", Section.BASELINE),
        ("evil", EVIL, Section.OPEN_IMAGE),
    ):
        spec = ModelSpec(
            name=name,
            display_name=display,
            section=section,
            adapter="random",
            weights=BuiltinModel(kind="builtin"),
            size="7B",
        )
        dump(specs_dir / "models" / f"{name}.yaml", spec)
    run = RunSpec(
        name="t",
        description="tools run",
        models=("random", "evil"),
        modes=MODES,
        data=FixtureSource(kind="fixture", samples_per_task=2),  # as many as each task file holds below
        output_dir=str(root / "out"),
        allow_incomplete=True,
    )
    dump(specs_dir / "runs" / "t.yaml", run)
    paper = yaml.safe_load((DEFAULT_SPECS / "paper.yaml").read_text(encoding="utf-8"))
    for table, key in (("main_table", "rows"), ("main_table", "inconsistencies"), ("contamination", "rows")):
        paper[table][key] = [row for row in paper[table][key] if row["model"] == "random"]
    paper["image_quantity"]["rows"] = [{"model": "random", "few": 0.2, "medium": 0.25, "many": 0.3}]
    paper["main_table"]["footnotes"] = {
        k: v for k, v in paper["main_table"]["footnotes"].items() if k == "random"
    }
    dump(specs_dir / "paper.yaml", paper)
    paths = RunPaths.for_run(run, base=root)
    for task, (group, random_score, evil_score) in TASKS.items():
        for mode in MODES:
            if mode is Mode.ADVERSARIAL and group in (Group.N1, Group.N2, Group.I1):
                continue
            needle = group in (Group.N1, Group.N2) and mode is Mode.MULTI_IMAGE
            samples = (
                [
                    needle_sample(task, group, 10 * i + d, n, d)
                    for i, n in enumerate(NEEDLE_LENGTHS)
                    for d in range(10)
                ]
                if needle
                else []
            )
            if needle:
                atomic_write_jsonl(paths.prepared(task, mode), [s.model_dump(mode="json") for s in samples])
            for model, value in (("random", random_score), ("evil", evil_score)):
                ids = [s.sample_id for s in samples] or [0, 1]
                # Needle scores: right only in the upper half of the depths, so the grid has a visible split.
                scores = [float(i % 10 < 5) for i in ids] if needle else [value / 100] * len(ids)
                rows = [judgment(task, model, mode, i, s) for i, s in zip(ids, scores, strict=True)]
                rows += [judgment(task, model, mode, i, 1.0, "standard") for i in ids]
                atomic_write_jsonl(
                    paths.judgments(model, task, mode), [j.model_dump(mode="json") for j in rows]
                )
                mean = 100 * sum(scores) / len(scores)
                level = {"Medium": LevelScore(score=mean, n=len(ids), n_scored=len(ids))}
                # One failed sample, so the LaTeX shows coverage beside numbers (allow_incomplete: true).
                failed = int((model, task, mode) == ("evil", "WebQA", Mode.COMBINED_IMAGE))
                score = TaskScore(
                    task=task,
                    model=model,
                    mode=mode,
                    scorer="paper",
                    denominator="expected",
                    score=mean,
                    scored_only=mean,
                    n=len(ids) + failed,
                    n_scored=len(ids),
                    n_missing=0,
                    n_failed=failed,
                    failed_ids=(99,) * failed,
                    levels=level,
                    variants={
                        "standard": VariantScore(scorer="standard", score=100.0, n_scored=len(ids), levels={})
                    },
                )
                atomic_write_json(paths.task_score(model, task, mode), score.model_dump(mode="json"))
    skipped = SkippedSample(sample_id=5, error="MileBench/WebQA/images/5_0.jpg: bad & 100% _x_ #1 {y} <z>")
    for task in TASKS:
        record = PrepareManifest(
            task=task,
            mode=Mode.MULTI_IMAGE,
            regime_id="full",
            regime=UNLIMITED,
            models=("random", "evil"),
            source=f"MileBench/{task}/{task}.json",
            source_sha256="0" * 64,
            n_samples=3,
            n_prepared=3 - (task == "WebQA"),
            skipped=(skipped,) if task == "WebQA" else (),
            n_truncated=0,
            images_kept=6,
            images_dropped_budget=0,
            images_unpaired=0,
            kit_pictures=0,
        )
        atomic_write_json(paths.prepared_manifest(task, Mode.MULTI_IMAGE), record.model_dump(mode="json"))
    atomic_write_json(
        paths.fetch_manifest,
        {"source": {"kind": "fixture", "path": "a_b & 100%"}, "archives": [{"sha256": "f" * 64}]},
    )
    return specs_dir, paths


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, RunPaths]:
    root = tmp_path_factory.mktemp("tools")
    specs_dir, paths = build_run(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert aggregate_and_report(specs_dir, "t") == 0
    specs = load_specs(specs_dir)
    return gather(specs, specs.run("t"), paths), paths


def test_needle_grid_places_samples_by_length_and_depth() -> None:
    samples = [
        needle_sample("TextNeedleInAHaystack", Group.N1, 10 * i + d, n, d)
        for i, n in enumerate((4, 8))
        for d in range(10)
    ]
    judged = [
        judgment("TextNeedleInAHaystack", "m", Mode.MULTI_IMAGE, s.sample_id, float(s.sample_id == 13))
        for s in samples
    ]
    grid = needle_grid(Group.N1, "m", "M", samples, judged)
    assert grid is not None and grid.n_samples == 20
    assert grid.lengths == ["40", "80"]  # words of the context
    assert len(grid.scores) == N_DEPTHS
    assert grid.scores[3] == [0.0, 100.0]  # sample 13: second length, answer at 30% of the text
    assert all(v == 0.0 for r, row in enumerate(grid.scores) for c, v in enumerate(row) if (r, c) != (3, 1))
    # N-2 has no measurable depth: the rank of the id among samples of the same image count stands in.
    images = [
        needle_sample("ImageNeedleInAHaystack", Group.N2, 10 * i + d, n, d)
        for i, n in enumerate((4, 8))
        for d in range(10)
    ]
    grid2 = needle_grid(Group.N2, "m", "M", images, judged)
    assert grid2 is not None and grid2.lengths == ["4", "8"] and grid2.scores[3] == [0.0, 100.0]


def test_truncation_shares_sum_the_records() -> None:
    record = TruncationRecord(
        mode="paper",
        max_context_len=100,
        n_tokens_per_image=10,
        images_total=4,
        images_kept=1,
        images_dropped_budget=3,
        pieces_total=5,
        pieces_kept=2,
        text_tokens_total=60,
        text_tokens_kept=20,
        image_tokens_kept=10,
    )
    sample = needle_sample("TextNeedleInAHaystack", Group.N1, 0, 4, 0).model_copy(
        update={"truncation": record}
    )
    share = seen_share([sample, sample])
    assert share is not None and share.truncated == 2
    assert share.images_share == pytest.approx(0.25)
    assert share.tokens_share == pytest.approx(30 / 100)  # (20 text + 10 image) of (60 text + 4 x 10 image)
    assert seen_share([sample.model_copy(update={"truncation": None})]) is None
    assert seen_share(None) is None


def test_report_has_every_part(rendered: tuple[Report, RunPaths]) -> None:
    result, paths = rendered
    assert [f.key for f in result.figures] == [
        "image-quantity",
        "needle-N-1",
        "needle-N-2",
        "multi-vs-combined",
    ]
    for figure in result.figures:
        assert figure.png.startswith(b"\x89PNG") and figure.pdf.startswith(b"%PDF")
        assert (paths.reports / "figures" / f"{figure.key}.pdf").read_bytes() == figure.pdf
    assert result.sensitivity is not None
    [standard] = result.sensitivity
    evil = next(r for r in standard.rows if r.model == "evil")
    assert (standard.scorer, evil.variant) == ("standard", (100.0, 100.0))
    (multi, *_) = result.truncation
    random_row = next(r for r in multi.rows if r.model == "random")
    assert random_row.regime == "full"
    assert random_row.tasks["TextNeedleInAHaystack"] is not None
    assert random_row.tasks["WebQA"] is None  # no prepared file: "not recorded"
    html = (paths.reports / "report.html").read_text(encoding="utf-8")
    assert html.count('<img src="data:image/png;base64,') == 4
    tasks = re.search(
        r'<table class="truncation-tasks" id="truncation-tasks-multi-image">(.*?)</table>', html, re.S
    )
    assert tasks
    assert (
        '<tr data-task="TextNeedleInAHaystack"><th scope="row">TextNeedleInAHaystack</th>\n<td data-model='
        '"random">100.0% / no budget</td>' in tasks.group(1)
    )
    assert (
        '<tr data-task="WebQA"><th scope="row">WebQA</th>\n<td data-model="random">not recorded</td>'
        in tasks.group(1)
    )
    assert '<tr><th scope="row" class="text">source.path</th><td>a_b &amp; 100%</td></tr>' in html
    assert "<script" not in html
    multi_skipped, combined_skipped, _ = result.skipped
    assert [(r.regime, r.n_skipped, r.tasks_recorded) for r in multi_skipped.regimes] == [("full", 1, 13)]
    assert combined_skipped.regimes[0].tasks_recorded == 0
    combined = next(m for m in result.modes if m.mode is Mode.COMBINED_IMAGE)
    evil_row = next(r for s in combined.sections for r in s.rows if r.model == "evil")
    assert set(evil_row.coverage) == {"S-1", "overall_real"}


def test_figures_are_byte_for_byte_repeatable(rendered: tuple[Report, RunPaths], tmp_path: Path) -> None:
    first, _ = rendered
    specs_dir, paths = build_run(tmp_path)
    specs = load_specs(specs_dir)
    assert write_aggregate(specs, specs.run("t"), resamples=200) == 0
    again = gather(specs, specs.run("t"), paths)
    assert [(f.png, f.pdf) for f in again.figures] == [(f.png, f.pdf) for f in first.figures]


def test_every_float_is_placed_with_htbp(rendered: tuple[Report, RunPaths]) -> None:
    """Tables and figures may go here, top, bottom or on a page of floats: none is pinned or left to the
    default top-or-page, which pushes long tables to the end."""
    result, paths = rendered
    tex = paths.report_tex.read_text(encoding="utf-8")
    floats = re.findall(r"\\begin\{(table|figure)\}(\[[a-zA-Z!]*\])?", tex)
    assert [kind for kind, _ in floats].count("figure") == len(result.figures) > 0
    assert {placement for _, placement in floats} == {"[htbp]"}


def compile_latex(work: Path, document: str) -> Path:
    """latexmk on one document of a copied reports folder, alone; its PDF, or the log's end as the failure."""
    done = subprocess.run(
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", document],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=240,
    )
    log = (work / document).with_suffix(".log").read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0, log[-3000:]
    assert "\n! " not in log, log[-3000:]
    pdf = (work / document).with_suffix(".pdf")
    assert pdf.read_bytes().startswith(b"%PDF")
    return pdf


@pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk absent: run .ci/report-tools.sh")
def test_latex_compiles_without_errors(rendered: tuple[Report, RunPaths], tmp_path: Path) -> None:
    """The report and its provenance document each compile on their own."""
    _, paths = rendered
    work = tmp_path / "tex"
    shutil.copytree(paths.reports, work)
    pdf = compile_latex(work, paths.report_tex.name)
    compile_latex(work, paths.report_provenance_tex.name)
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", pdf.name, "-"], cwd=work, capture_output=True, text=True).stdout
        assert 'Evil <script>alert("x")</script> & my_model 50% #1' in text


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def open_in_chromium(
    html: Path, profile: Path, evaluate: Sequence[str] = ()
) -> tuple[list[str], list[list], bytes, list[object]]:
    """Load ``html`` in a 1280-pixel-wide window; return console / log errors, each <img>'s (complete,
    naturalWidth), a screenshot, and the value of each ``evaluate`` expression, run in order."""
    connect = pytest.importorskip("websockets.sync.client", reason="the CDP check needs `websockets`").connect

    proc = subprocess.Popen(
        [chromium(), *CHROMIUM_FLAGS, "--window-size=1280,900", f"--user-data-dir={profile}", "about:blank"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "DevTools listening on" in line:
                port = line.rsplit(":", 1)[1].split("/", 1)[0]
                break
        else:
            pytest.fail("chromium exited without a DevTools endpoint")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        errors: list[str] = []
        with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30) as ws:
            counter = iter(range(1, 1000))

            def call(method: str, **params: object) -> dict:
                ident = next(counter)
                ws.send(json.dumps({"id": ident, "method": method, "params": params}))
                while True:
                    message = json.loads(ws.recv(timeout=60))
                    collect(message)
                    if message.get("id") == ident:
                        return message.get("result", {})

            def collect(message: dict) -> None:
                method, params = message.get("method"), message.get("params", {})
                if method == "Runtime.exceptionThrown":
                    errors.append(json.dumps(params["exceptionDetails"])[:500])
                elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                    errors.append(json.dumps(params["args"])[:500])
                elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                    errors.append(params["entry"]["text"])

            for domain in ("Runtime", "Log", "Page"):
                call(f"{domain}.enable")
            call("Page.navigate", url=html.as_uri())
            while True:
                message = json.loads(ws.recv(timeout=60))
                collect(message)
                if message.get("method") == "Page.loadEventFired":
                    break
            images = call(
                "Runtime.evaluate",
                expression="Array.from(document.images).map(i => [i.complete, i.naturalWidth])",
                returnByValue=True,
            )["result"]["value"]
            values = [
                call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")
                for expression in evaluate
            ]
            shot = call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        import base64

        return errors, images, base64.b64decode(shot["data"]), values
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.skipif(chromium() is None, reason="chromium absent: run .ci/report-tools.sh")
def test_html_loads_in_chromium_without_errors(rendered: tuple[Report, RunPaths], tmp_path: Path) -> None:
    _, paths = rendered
    errors, images, screenshot, _ = open_in_chromium(paths.report_html.resolve(), tmp_path / "profile")
    assert errors == []
    assert len(images) == 4 and all(complete and width > 0 for complete, width in images)
    assert screenshot.startswith(b"\x89PNG")
