"""``milebench embed-pools``: one real-task dataset read from the user's files, built, checked, written."""

from __future__ import annotations

import argparse
import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

from milebench.benchmarks.mmlongembed.commands import _run
from milebench.benchmarks.mmlongembed.corpus import bundled_sentences, split_sentences
from milebench.benchmarks.mmlongembed.paths import EVIDENCE
from milebench.benchmarks.mmlongembed.provenance import write_provenance
from milebench.benchmarks.mmlongembed.records import CANDIDATES, IMAGES, POOLS, QRELS, QUERIES, TextSegment
from milebench.benchmarks.mmlongembed.spec import specs_folder
from milebench.benchmarks.mmlongembed.task_inputs import Reader
from milebench.benchmarks.mmlongembed.task_pools import build, validate
from milebench.benchmarks.mmlongembed.task_sources import load_sources
from milebench.benchmarks.mmlongembed.task_spec import RealTask
from milebench.io import atomic_write_json, atomic_write_jsonl, sha256_file
from milebench.preprocess.tokenizer import TokenizerError
from milebench.provenance import utc_now
from milebench.record_files import RecordError
from milebench.spec.base import SpecError, spec_hash

log = logging.getLogger(__name__)


def padding_text(spec: RealTask, specs_root: Path, reader: Reader) -> Sequence[TextSegment]:
    """The unrelated prose padding and Hard replacements are drawn from, as counted sentences."""
    path = spec.padding_path(specs_root)
    if path is None:
        return reader.texts(bundled_sentences())
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise RecordError(f"{path}: padding text cannot be read: {err}") from None
    sentences = [s for p in text.split("\n\n") for s in split_sentences(" ".join(p.split()))]
    if not sentences:
        raise RecordError(f"{path}: padding text is empty")
    return reader.texts(sentences)


def input_digest(path: Path) -> str:
    """The input file's hash; a folder of reports (GovReport): the hash of its files' names and hashes."""
    if not path.is_dir():
        return sha256_file(path)
    listing = "".join(f"{p.name}\t{sha256_file(p)}\n" for p in sorted(path.glob("*.json")))
    return hashlib.sha256(listing.encode()).hexdigest()


def pools_command(args: argparse.Namespace) -> int:
    from milebench.benchmarks.mmlongembed.lengths import load_counting_tokenizer

    started = utc_now()
    _, run, paths = _run(args)
    spec = next((t for t in run.real_tasks if t.dataset == args.dataset), None)
    if spec is None:
        known = ", ".join(t.dataset for t in run.real_tasks) or "none"
        where = specs_folder(args.specs) / "runs" / f"{run.name}.yaml"
        raise SpecError(where, [("real_tasks", f"no dataset {args.dataset!r}; known: {known}")])
    folder = paths.task_set(spec.dataset)
    source = spec.input_path(args.specs)
    try:
        reader = Reader(load_counting_tokenizer(run.counting_tokenizer), folder)
        sources = load_sources(spec.task, source, reader, spec.source, spec.model_output_path(args.specs))
        taskset = build(spec, sources, padding_text(spec, args.specs, reader), reader.tokenizer, source)
        validate(spec, taskset, folder)
        (folder / IMAGES).mkdir(parents=True, exist_ok=True)  # a declared output, even without pictures
        reader.write_images()
    except RecordError as err:
        log.error("%s", err)
        return err.exit_status
    except TokenizerError as err:
        log.error("%s", err)
        return 1
    for name, rows in (
        (QUERIES, taskset.queries),
        (CANDIDATES, taskset.candidates),
        (POOLS, taskset.pools),
        (QRELS, taskset.qrels),
        (EVIDENCE, taskset.constructions),
    ):
        atomic_write_jsonl(folder / name, (r.model_dump(mode="json") for r in rows))
    manifest = {
        "task": spec.task.value,
        "counts": {"queries": len(taskset.queries), "candidates": len(taskset.candidates)},
        "candidates_per_query": spec.candidates,
        "real_task": spec_hash(spec),
        "input_sha256": input_digest(source),
        "counting_tokenizer": run.counting_tokenizer.model_dump(mode="json"),
    }
    manifest_path = paths.task_manifest(spec.dataset)
    atomic_write_json(manifest_path, manifest)
    write_provenance(manifest_path, "embed-pools", run.name, {"real_task": spec_hash(spec)}, started)
    log.info(
        "%s: %d queries, %d candidates -> %s",
        spec.dataset,
        len(taskset.queries),
        len(taskset.candidates),
        folder,
    )
    return 0
