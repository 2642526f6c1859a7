"""The bundle manifest's format: format 2 names the benchmark whose run it holds; a format 1 manifest
(MileBench's bundles before any other benchmark had them) still reads as MileBench's and keeps its bytes,
so its id, and a manifest naming no benchmark, another format or a benchmark this kit lacks is refused by
name. Small bundles of one file, made here: no run needed."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from milebench import cli
from milebench.archive.manifest import (
    FIRST_FORMAT,
    FORMAT,
    MANIFEST,
    RefusedBundle,
    bundle_id,
    write_manifest,
)
from milebench.archive.reader import read_manifest
from milebench.io import sha256_file
from milebench.spec.benchmark import benchmarks

FIRST_FORMAT_KEYS = (
    "format",
    "run",
    "specs",
    "root",
    "kit_commits",
    "dirty",
    "images",
    "with_data",
    "with_weights",
    "files",
)
"""The fields of a format 1 manifest, in the order it wrote them."""


def one_file_bundle(folder: Path, **fields: Any) -> Path:
    """A bundle folder of one log file whose manifest has ``fields`` over format 2's defaults."""
    log_file = folder / "run" / "results" / "r" / "logs" / "rule" / "job.log"
    log_file.parent.mkdir(parents=True)
    log_file.write_text("done\n")
    entry = {
        "path": "run/results/r/logs/rule/job.log",
        "sha256": sha256_file(log_file),
        "size": log_file.stat().st_size,
        "role": "log",
        "produced_by": "snakemake rule rule (log of job)",
        "backs": ["Available"],
    }
    manifest = {
        "format": FORMAT,
        "benchmark": "milebench",
        "run": "r",
        "specs": "specs",
        "root": "run",
        "kit_commits": ["0" * 40],
        "dirty": False,
        "images": [],
        "with_data": False,
        "with_weights": False,
        "files": [entry],
        **fields,
    }
    (folder / MANIFEST).write_text(
        json.dumps({k: v for k, v in manifest.items() if v is not None}, indent=1) + "\n"
    )
    return folder


def first_format(folder: Path) -> Path:
    """The bundle as format 1 wrote it: no ``benchmark`` field, the fields in their order."""
    bundle = one_file_bundle(folder, format=FIRST_FORMAT, benchmark=None)
    manifest = json.loads((bundle / MANIFEST).read_text())
    assert tuple(manifest) == FIRST_FORMAT_KEYS
    return bundle


def test_a_format_1_manifest_reads_as_milebench_and_keeps_its_bytes_and_id(tmp_path: Path) -> None:
    bundle = first_format(tmp_path)
    before, identity = (bundle / MANIFEST).read_bytes(), bundle_id(bundle)
    manifest = read_manifest(bundle)
    assert (manifest.format, manifest.benchmark) == (FIRST_FORMAT, "milebench")
    assert write_manifest(bundle, manifest) == identity
    assert (bundle / MANIFEST).read_bytes() == before
    assert cli.main(["verify", str(bundle), "--only", "hashes"]) == 0


def test_a_format_2_manifest_names_its_benchmark_and_round_trips(tmp_path: Path) -> None:
    bundle = one_file_bundle(tmp_path, benchmark="mmlongembed")
    manifest = read_manifest(bundle)
    assert (manifest.format, manifest.benchmark) == (FORMAT, "mmlongembed")
    identity = bundle_id(bundle)
    assert write_manifest(bundle, manifest) == identity


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"benchmark": None}, "benchmark: Field required"),
        ({"format": FIRST_FORMAT}, f"benchmark: not a field of format {FIRST_FORMAT}"),
        ({"format": "milebench-bundle/3"}, "format: Input should be"),
        ({"benchmark": "../milebench"}, "benchmark: String should match pattern"),
    ],
)
def test_a_manifest_of_no_known_format_is_refused_naming_the_field(
    fields: dict[str, Any], expected: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bundle = one_file_bundle(tmp_path, **fields)
    with pytest.raises(RefusedBundle, match="not a bundle manifest") as refused:
        read_manifest(bundle)
    assert str(refused.value).startswith(f"{bundle / MANIFEST}: ") and expected in str(refused.value)
    with caplog.at_level(logging.ERROR):
        assert cli.main(["verify", str(bundle), "--only", "hashes"]) == 2
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [str(refused.value)]


def test_a_bundle_of_a_benchmark_this_kit_lacks_is_refused_naming_the_ones_it_has(tmp_path: Path) -> None:
    bundle = one_file_bundle(tmp_path, benchmark="elsewhere")
    with pytest.raises(Exception, match="benchmark 'elsewhere' is not installed here; known: ") as refused:
        read_manifest(bundle)
    assert all(name in str(refused.value) for name in benchmarks())
    assert getattr(refused.value, "exit_status", None) == 2
