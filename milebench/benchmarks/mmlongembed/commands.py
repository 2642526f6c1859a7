"""The ``milebench embed-*`` commands, one per Snakemake rule: generate, run a model, evaluate, report."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from milebench.benchmarks.mmlongembed.paths import EmbedPaths
from milebench.benchmarks.mmlongembed.provenance import write_provenance
from milebench.benchmarks.mmlongembed.records import (
    CANDIDATES,
    POOLS,
    QRELS,
    QUERIES,
    Candidate,
    Pool,
    Qrel,
    Query,
)
from milebench.benchmarks.mmlongembed.spec import EmbedRunSpec, EmbedSpecs, load_embed_specs
from milebench.io import atomic_write_json, atomic_write_jsonl, read_jsonl
from milebench.preprocess.tokenizer import TokenizerError
from milebench.provenance import utc_now
from milebench.record_files import RecordError, read_record, read_records
from milebench.spec.base import spec_hash
from milebench.stage_inputs import command, require

log = logging.getLogger(__name__)


def _run(args: argparse.Namespace) -> tuple[EmbedSpecs, EmbedRunSpec, EmbedPaths]:
    """The specs, the run and its layout under the job's ``--root``."""
    specs = load_embed_specs(args.specs)
    run = specs.run(args.run)
    return specs, run, EmbedPaths.for_run(run, base=args.root)


def generate_command(args: argparse.Namespace) -> int:
    from milebench.benchmarks.mmlongembed.generate import generate
    from milebench.benchmarks.mmlongembed.haystack import load_material
    from milebench.benchmarks.mmlongembed.lengths import load_counting_tokenizer

    started = utc_now()
    _, run, paths = _run(args)
    vg = run.visual_grounding
    paths.vg_images.mkdir(parents=True, exist_ok=True)  # a declared output, even where no picture is made
    try:
        tokenizer = load_counting_tokenizer(run.counting_tokenizer)
        material = load_material(vg.haystack, Path(args.specs), tokenizer, vg.seed, paths.vg)
        vgset = generate(vg, material, tokenizer, paths.vg, Path(args.specs))
    except RecordError as err:
        log.error("%s", err)
        return err.exit_status
    except TokenizerError as err:
        log.error("%s", err)
        return 1
    for name, rows in (
        (QUERIES, vgset.queries),
        (CANDIDATES, vgset.candidates),
        (POOLS, vgset.pools),
        (QRELS, vgset.qrels),
    ):
        atomic_write_jsonl(paths.vg / name, (r.model_dump(mode="json") for r in rows))
    manifest = {
        "counts": {"queries": len(vgset.queries), "candidates": len(vgset.candidates)},
        "visual_grounding": spec_hash(vg),
        "counting_tokenizer": run.counting_tokenizer.model_dump(mode="json"),
    }
    atomic_write_json(paths.vg_manifest, manifest)
    write_provenance(
        paths.vg_manifest, "embed-generate", run.name, {"visual_grounding": spec_hash(vg)}, started
    )
    log.info("%d queries, %d candidates -> %s", len(vgset.queries), len(vgset.candidates), paths.vg)
    return 0


def _read_set(
    paths: EmbedPaths, run: EmbedRunSpec
) -> tuple[list[Query], list[Candidate], dict[str, Pool], list[Qrel]]:
    """The Visual Grounding set and each real-task set of the run, as one set of pools."""
    sets = [(paths.vg, paths.vg_manifest, "Visual Grounding set", command("embed-generate", run=run.name))]
    sets += [
        (
            paths.task_set(t.dataset),
            paths.task_manifest(t.dataset),
            f"{t.task.value} set",
            command("embed-pools", run=run.name, dataset=t.dataset),
        )
        for t in run.real_tasks
    ]
    queries: list[Query] = []
    candidates: list[Candidate] = []
    pools: dict[str, Pool] = {}
    qrels: list[Qrel] = []
    for folder, manifest, what, made_by in sets:
        require(manifest, what, made_by)
        these = read_records(folder / QUERIES, Query)
        read = read_records(folder / CANDIDATES, Candidate)
        known = {c.id for c in read}
        candidates += read
        found = {p.query: p for p in read_records(folder / POOLS, Pool)}
        for query in these:
            pool = found.get(query.id)
            if pool is None:
                raise RecordError(f"{folder / POOLS}: query {query.id} has no pool")
            if not set(pool.candidates) <= known:
                raise RecordError(f"{folder / POOLS}: query {query.id}: candidates not in {CANDIDATES}")
        queries += these
        pools.update(found)
        qrels += read_records(folder / QRELS, Qrel)
    return queries, candidates, pools, qrels


def run_command(args: argparse.Namespace) -> int:
    from milebench.benchmarks.mmlongembed.embedders import load_adapter

    started = utc_now()
    specs, run, paths = _run(args)
    if args.model not in run.models:
        log.error("%s: model %s is not in the run's models (%s)", run.name, args.model, ", ".join(run.models))
        return 1
    spec = specs.models[args.model]
    try:
        queries, candidates, pools, _ = _read_set(paths, run)
        folders = [paths.vg, *(paths.task_set(t.dataset) for t in run.real_tasks)]
        adapter = load_adapter(spec, paths.cache(spec.name), args.threads, folders)
        inputs = {c.id: adapter.read(c) for c in candidates}
        scores = adapter.score(queries, pools, inputs)
    except (RecordError, TokenizerError) as err:
        log.error("%s", err)
        return 1
    atomic_write_jsonl(
        paths.inputs(spec.name),
        ({"candidate": cid, "length": i.length, "needle": i.needle} for cid, i in inputs.items()),
    )
    atomic_write_jsonl(paths.scores(spec.name), ({"query": q, "scores": s} for q, s in scores.items()))
    write_provenance(
        paths.scores(spec.name),
        "embed-run",
        run.name,
        {"run": spec_hash(run), "model": spec_hash(spec)},
        started,
    )
    log.info("%s: %d queries scored -> %s", spec.name, len(scores), paths.scores(spec.name))
    return 0


def evaluate_command(args: argparse.Namespace) -> int:
    from milebench.benchmarks.mmlongembed.evaluate import evaluate

    _, run, paths = _run(args)
    made_by = command("embed-run", run=run.name, model=args.model)
    require(paths.scores(args.model), "query scores", made_by)
    require(paths.inputs(args.model), "model inputs", made_by)
    try:
        queries, _, _, qrels = _read_set(paths, run)
        scores = {row["query"]: row["scores"] for row in read_jsonl(paths.scores(args.model))}
        needle = {row["candidate"]: row["needle"] for row in read_jsonl(paths.inputs(args.model))}
    except (RecordError, OSError, KeyError, ValueError) as err:
        log.error("%s: %s", args.model, err)
        return 1
    missing = [q.id for q in queries if q.id not in scores]
    if missing:
        log.error(
            "%s: %d queries have no scores (first: %s)", paths.scores(args.model), len(missing), missing[0]
        )
        return 1
    positive = {r.query: r.candidate for r in qrels if r.relevance >= 1}
    seen = {q.id: float(needle.get(positive.get(q.id, ""), "") == "whole") for q in queries}
    result = evaluate(run, queries, qrels, scores, seen)
    atomic_write_json(paths.metrics(args.model), {"model": args.model, **result})
    log.info("%s -> %s", args.model, paths.metrics(args.model))
    return 0


def _metrics(run: EmbedRunSpec, paths: EmbedPaths) -> dict[str, dict[str, Any]]:
    """Every run model's evaluate output; a file that is not JSON raises ``RecordError`` naming it."""
    out = {}
    for model in run.models:
        path = paths.metrics(model)
        require(path, "metrics", command("embed-evaluate", run=run.name, model=model))
        try:
            out[model] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise RecordError(f"{path}: {err}") from None
    return out


def aggregate_command(args: argparse.Namespace) -> int:
    from milebench.benchmarks.mmlongembed.aggregate import build_analysis
    from milebench.benchmarks.mmlongembed.paper import load_embed_paper

    started = utc_now()
    specs, run, paths = _run(args)
    paper = load_embed_paper(specs)
    try:
        metrics = _metrics(run, paths)
        queries = _read_set(paths, run)[0]
    except RecordError as err:
        log.error("%s", err)
        return 1
    try:
        analysis = build_analysis(run, specs, paper, queries, metrics)
    except KeyError as err:
        log.error("%s: a metrics file lacks %s (run embed-evaluate again)", paths.out / "metrics", err)
        return 1
    atomic_write_json(paths.analysis, analysis.model_dump(mode="json"))
    write_provenance(
        paths.analysis,
        "embed-aggregate",
        run.name,
        {"run": spec_hash(run), "paper": spec_hash(paper)},
        started,
    )
    log.info("analyses and verdict -> %s", paths.analysis)
    return 0


def report_command(args: argparse.Namespace) -> int:
    from milebench.benchmarks.mmlongembed.aggregate import Analysis
    from milebench.benchmarks.mmlongembed.report import write_report

    specs, run, paths = _run(args)
    try:
        metrics = _metrics(run, paths)
        analysis = read_record(paths.analysis, Analysis, "analyses", command("embed-aggregate", run=run.name))
    except RecordError as err:
        log.error("%s", err)
        return 1
    write_report(run, specs, metrics, analysis, paths)
    return 0
