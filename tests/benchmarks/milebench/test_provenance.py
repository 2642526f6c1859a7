"""Job provenance manifests: what they record, where, and how the report condenses them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path

import pytest

from milebench import provenance
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import Cell
from milebench.benchmarks.milebench.provenance import (
    JobProvenance,
    data_revision,
    job_provenance,
    read_provenance,
    write_provenance,
)
from milebench.benchmarks.milebench.report.provenance import run_provenance
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.provenance import COMMIT_VAR, DIRTY_VAR, IMAGE_ID_VAR, provenance_path
from milebench.spec.base import spec_hash

ARCHIVES = {"MileBench_part0.tar.gz": "a" * 64, "MileBench_part1.tar.gz": "b" * 64}


def fetch_manifest(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "source": {"kind": "hub", "repo_id": "FreedomIntelligence/MileBench", "revision": "c" * 40},
                "archives": [{"name": n, "size": 1, "sha256": s, "url": "u"} for n, s in ARCHIVES.items()],
            }
        )
    )
    return path


def record(tmp_path: Path, model: str = "llava-1.5-7b", **environ: str) -> JobProvenance:
    specs = load_specs()
    run = specs.run("paper")
    return job_provenance(
        stage="infer",
        specs=specs,
        run=run,
        model=specs.models[model],
        task="WebQA",
        mode="multi-image",
        outputs=(tmp_path / "WebQA.jsonl",),
        fetch_manifest=fetch_manifest(tmp_path / "data" / "fetch.json"),
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        environ=environ,
    )


def git_checkout(root: Path) -> str:
    """A one-commit repository at ``root``; returns its commit."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "kit.py").write_text("x = 1\n", encoding="utf-8")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": os.environ["PATH"]}  # fmt: skip
    for args in (["init", "-q"], ["add", "kit.py"], ["commit", "-q", "-m", "one"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env, capture_output=True)
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True)
    return done.stdout.decode().strip()


def test_manifest_records_specs_data_weights_and_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    commit = git_checkout(tmp_path / "kit")
    monkeypatch.setattr(provenance, "KIT_ROOT", tmp_path / "kit")
    specs = load_specs()
    job = record(tmp_path)
    assert job.specs == {
        "run": spec_hash(specs.run("paper")),
        "model": spec_hash(specs.models["llava-1.5-7b"]),
        "task": spec_hash(specs.tasks["WebQA"]),
    }
    assert job.data is not None and job.data.revision == "c" * 40 and job.data.archives == ARCHIVES
    assert job.weights_revision == "unpinned"  # the spec leaves the revision to the weights lock
    assert job.seeds == {"generation": 0}
    assert job.environment.image_id is None
    assert job.environment.packages["pydantic"]
    assert job.finished_at >= job.started_at
    assert job.kit == provenance.KitVersion(commit=commit, dirty=False)


def test_a_checkout_with_uncommitted_changes_is_dirty(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    commit = git_checkout(tmp_path)
    (tmp_path / "kit.py").write_text("x = 2\n", encoding="utf-8")
    monkeypatch.setattr(provenance, "KIT_ROOT", tmp_path)
    assert provenance.kit_version({}) == provenance.KitVersion(commit=commit, dirty=True)


def test_container_facts_come_from_the_environment(tmp_path: Path) -> None:
    job = record(tmp_path, **{IMAGE_ID_VAR: "sha256:" + "d" * 64, COMMIT_VAR: "e" * 40, DIRTY_VAR: "0"})
    assert job.environment.image_id == "sha256:" + "d" * 64
    assert (job.kit.commit, job.kit.dirty) == ("e" * 40, False)


def test_outside_a_checkout_the_commit_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(provenance, "KIT_ROOT", tmp_path)
    assert provenance.kit_version({}) == provenance.KitVersion(commit="unknown", dirty=None)


def test_missing_fetch_manifest_is_recorded_as_none(tmp_path: Path) -> None:
    assert data_revision(tmp_path / "absent.json") is None


def test_torch_is_described_only_when_the_job_loaded_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert provenance.torch_info() == "not loaded"
    cuda = types.SimpleNamespace(
        is_available=lambda: True, device_count=lambda: 1, get_device_name=lambda i: "H100"
    )
    fake = types.SimpleNamespace(__version__="2.4.0", version=types.SimpleNamespace(cuda="12.1"), cuda=cuda)
    monkeypatch.setitem(sys.modules, "torch", fake)
    info = provenance.torch_info()
    assert not isinstance(info, str)
    assert (info.version, info.cuda, info.cuda_available, info.gpus) == ("2.4.0", "12.1", True, ("H100",))


def test_weights_revision_by_kind() -> None:
    specs = load_specs()
    assert provenance.weights_revision(specs.models["random"]) == "builtin"
    assert provenance.weights_revision(specs.models["tiny-llava"]) == "tiny llava seed 0"
    assert provenance.weights_revision(specs.models["gpt-4o"]).startswith("api openai ")
    llava = specs.models["llava-1.5-7b"]
    pinned = llava.model_copy(update={"weights": llava.weights.model_copy(update={"revision": "f" * 40})})
    assert provenance.weights_revision(pinned) == "f" * 40


def test_written_atomically_beside_the_output_and_read_back(tmp_path: Path) -> None:
    job = record(tmp_path)
    path = provenance_path(tmp_path / "WebQA.jsonl")
    assert path.name == "WebQA.jsonl.provenance.json"
    write_provenance(path, job)
    assert read_provenance(path) == job
    assert not list(tmp_path.glob(".*.tmp"))
    path.write_text("{}")
    with pytest.raises(ValueError, match=r"WebQA\.jsonl\.provenance\.json"):
        read_provenance(path)


def test_report_condenses_job_manifests(tmp_path: Path) -> None:
    paths = RunPaths(out=tmp_path / "results" / "r", reports=tmp_path / "reports" / "r")
    fetch_manifest(paths.fetch_manifest)
    job = record(tmp_path)
    write_provenance(paths.infer_provenance("llava-1.5-7b", "WebQA", "multi-image"), job)
    scored = job.model_copy(update={"stage": "score"})
    write_provenance(paths.score_provenance("llava-1.5-7b", "WebQA", "multi-image"), scored)
    other = job.model_copy(
        update={"model": "random", "environment": job.environment.model_copy(update={"image_id": "sha256:1"})}
    )
    write_provenance(paths.infer_provenance("random", "WebQA", "multi-image"), other)

    found = run_provenance(paths, [Cell(m, "WebQA", Mode.MULTI_IMAGE) for m in ("llava-1.5-7b", "random")])
    assert [e.label for e in found.environments] == ["job environment 1", "job environment 2"]
    first, second = found.environments
    assert first.facts["jobs"] == "2 (infer 1, score 1)" and second.facts["jobs"] == "1 (infer 1)"
    assert second.facts["image"] == "1" and second.image == "sha256:1" and first.facts["image"] == "host"
    assert first.differs == second.differs == {"image"}  # the rest of the two environments agrees
    assert first.facts["weights"] == f"llava-1.5-7b {job.weights_revision}"
    assert first.facts["data"] == f"hub {'c' * 40}"
    assert ("pydantic", job.environment.packages["pydantic"]) in first.packages
    assert found.jobs is not None
    lines = dict(found.jobs.entries)
    assert set(lines) == {
        "infer llava-1.5-7b/multi-image/WebQA",
        "score llava-1.5-7b/multi-image/WebQA",
        "infer random/multi-image/WebQA",
    }
    assert "environment 2" in lines["infer random/multi-image/WebQA"]
    # the data manifests, key by key
    assert [m.path for m in found.data] == [str(paths.fetch_manifest)]


def test_package_differences_between_environments_are_marked(tmp_path: Path) -> None:
    paths = RunPaths(out=tmp_path / "results" / "r", reports=tmp_path / "reports" / "r")
    job = record(tmp_path)
    env = job.environment
    other = env.model_copy(update={"packages": {**env.packages, "pydantic": "0.1", "extra-pkg": "1.0"}})
    write_provenance(paths.infer_provenance("llava-1.5-7b", "WebQA", "multi-image"), job)
    moved = job.model_copy(update={"model": "random", "environment": other})
    write_provenance(paths.infer_provenance("random", "WebQA", "multi-image"), moved)
    cells = [Cell(m, "WebQA", Mode.MULTI_IMAGE) for m in ("llava-1.5-7b", "random")]
    first, second = run_provenance(paths, cells).environments
    assert first.package_differences == ["extra-pkg absent", f"pydantic {env.packages['pydantic']}"]
    assert second.package_differences == ["extra-pkg 1.0", "pydantic 0.1"]
    assert "packages" in first.differs and "2 differ: extra-pkg absent" in first.facts["packages"]
