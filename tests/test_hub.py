"""The hub path against a real hub server: olah serving git repositories in the hub's shape (conftest's
``olah_hub``), reached through the real huggingface_hub client and ``from_pretrained``.

``hub-smoke`` (tests/hub/runs/) is the smoke run on three of its tasks with its data and the tiny models'
weights from the hub; the smoke run on the same tasks, its data generated here, is the reference: both
must reach the same aggregate and verdict, but for the run's name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from hub_server import (
    DATASET,
    DENIED,
    PORTS_RUN,
    Olah,
    commit,
    free_port,
    git,
    mirror_path,
    model_repo_id,
    ported_hub_models,
)
from mini_specs import linked_specs
from unavailable import unavailable

from milebench.benchmarks.milebench.provenance import read_provenance
from milebench.benchmarks.milebench.spec.data_lock import load_lock
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.io import sha256_file
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.model import TinyWeights
from milebench.spec.weights_lock import load_weights_lock

pytestmark = pytest.mark.hub

REPO = Path(__file__).resolve().parents[1]
HUB_RUNS = Path(__file__).parent / "hub" / "runs"
RUN = "hub-smoke"
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--cores", "2"]
HUB_VARIABLES = (
    "HF_ENDPOINT",
    "HF_HOME",
    "HF_TOKEN",
    "HF_HUB_OFFLINE",
    "HF_HUB_CACHE",
    "TRANSFORMERS_OFFLINE",
)


def hub_run_spec() -> dict[str, object]:
    return yaml.safe_load((HUB_RUNS / f"{RUN}.yaml").read_text())


def hub_specs(folder: Path) -> Path:
    """A specs folder of the kit's tasks and models in which the tiny models' weights live on the hub,
    with the hub runs and empty locks (lock-data and lock-weights fill them)."""
    folder.mkdir(parents=True)
    for part in ("tasks", "paper.yaml"):
        (folder / part).symlink_to(DEFAULT_SPECS / part, target_is_directory=part == "tasks")
    (folder / "models").mkdir()
    for path in sorted((DEFAULT_SPECS / "models").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if data["weights"]["kind"] == "tiny":
            data["weights"] = {"kind": "hf", "repo_id": model_repo_id(load_specs().models[data["name"]])}
            (folder / "models" / path.name).write_text(yaml.safe_dump(data, sort_keys=False))
        else:
            (folder / "models" / path.name).symlink_to(path)
    shutil.copytree(HUB_RUNS, folder / "runs")
    (folder / "locks").mkdir()
    return folder


def hub_env(endpoint: str, hf_home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in HUB_VARIABLES}
    return {**env, "HF_ENDPOINT": endpoint, "HF_HOME": str(hf_home), **extra}


def milebench(
    specs: Path, env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "milebench", "--specs", str(specs), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def snakemake(root: Path, specs: Path, run: str, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [*SNAKEMAKE, *args, "--config", f"run={run}", f"specs={specs}"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def one_error(result: subprocess.CompletedProcess[str]) -> str:
    """The one error line a failed command printed; fails on a traceback or more than one error."""
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line or line.startswith("ERROR")]
    assert len(errors) == 1, result.stderr[-3000:]
    return errors[0]


@dataclass(frozen=True)
class HubRun:
    root: Path
    specs: Path
    hf_home: Path
    hub: Olah
    data_commit: str
    model_commits: dict[str, str]

    def env(self, **extra: str) -> dict[str, str]:
        return hub_env(self.hub.endpoint, self.hf_home, **extra)

    @property
    def out(self) -> Path:
        return self.root / "results" / RUN


@pytest.fixture(scope="module")
def hub_run(olah_hub: Olah, tmp_path_factory: pytest.TempPathFactory) -> HubRun:
    """lock-data, lock-weights, then the whole hub-smoke run from an empty Hugging Face cache."""
    root = tmp_path_factory.mktemp("hub-run")
    specs = hub_specs(root / "specs")
    tiny = [n for n, m in load_specs().models.items() if isinstance(m.weights, TinyWeights)]
    models = [m for m in hub_run_spec()["models"] if m in tiny]  # type: ignore[union-attr]
    run = HubRun(
        root,
        specs,
        root / "hf-home",
        olah_hub,
        git(mirror_path(olah_hub.mirrors, "datasets", DATASET), "rev-parse", "HEAD"),
        {
            m: git(
                mirror_path(olah_hub.mirrors, "models", model_repo_id(load_specs().models[m])),
                "rev-parse",
                "HEAD",
            )
            for m in models
        },
    )
    for command in (
        ("lock-data", "--out", str(specs / "locks" / "milebench-hub.lock.yaml")),
        ("lock-weights", "--run", RUN),
    ):
        result = milebench(specs, run.env(), *command)
        assert result.returncode == 0, result.stderr[-3000:]
    snakemake(root, specs, RUN, run.env())
    return run


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke run on hub-smoke's tasks, its data generated here (the reference)."""
    root = tmp_path_factory.mktemp("fixture-run")
    specs = linked_specs(root / "specs")
    smoke = yaml.safe_load((DEFAULT_SPECS / "runs" / "smoke.yaml").read_text())
    (specs / "runs" / "smoke.yaml").write_text(yaml.safe_dump({**smoke, "tasks": hub_run_spec()["tasks"]}))
    snakemake(root, specs, "smoke", hub_env("http://127.0.0.1:9", root / "hf-home"))
    return root


def test_hub_smoke_is_the_smoke_run_but_for_its_data_and_tasks() -> None:
    smoke = yaml.safe_load((DEFAULT_SPECS / "runs" / "smoke.yaml").read_text())
    hub = hub_run_spec()
    assert {k: v for k, v in hub.items() if k not in ("name", "description", "tasks", "data")} == {
        k: v for k, v in smoke.items() if k not in ("name", "description", "tasks", "data")
    }
    assert hub["data"] == {"kind": "hub", "lock": "locks/milebench-hub.lock.yaml"}


def test_lock_data_pins_the_hub_commit_and_every_archive(hub_run: HubRun, fixture_run: Path) -> None:
    lock = load_lock(hub_run.specs / "locks" / "milebench-hub.lock.yaml")
    assert (lock.repo_id, lock.revision) == (DATASET, hub_run.data_commit)
    dataset = mirror_path(hub_run.hub.mirrors, "datasets", DATASET)
    committed = sorted(p for p in dataset.glob("MileBench_part*.tar.gz"))
    assert [(a.name, a.size, a.sha256) for a in lock.archives] == [
        (p.name, p.stat().st_size, sha256_file(p)) for p in committed
    ]
    # the archives on the hub are the ones the smoke run generates
    generated = load_lock(fixture_run / "results" / "smoke" / "mirror" / "milebench.lock.yaml")
    assert lock.archives == generated.archives


def test_lock_weights_pins_each_model_to_its_commit(hub_run: HubRun) -> None:
    lock = load_weights_lock(hub_run.specs / "locks" / "weights.lock.yaml")
    assert lock.revisions == hub_run.model_commits


@pytest.mark.parametrize("model", [m.name for m in ported_hub_models(load_specs())])
def test_lock_weights_pins_a_ported_familys_tiny_checkpoint_and_the_client_downloads_it(
    olah_hub: Olah, tmp_path: Path, model: str
) -> None:
    """A ported family whose paper model loads from the hub: its tiny checkpoint's repository is pinned
    at the mirror's commit, and the real client downloads every committed file, byte for byte, at it."""
    from huggingface_hub import snapshot_download

    if model in olah_hub.unbuilt:
        unavailable(f"hub: {model}'s tiny checkpoint cannot be built here: {olah_hub.unbuilt[model]}")
    specs = hub_specs(tmp_path / "specs")
    ports = yaml.safe_load((DEFAULT_SPECS / "runs" / f"{PORTS_RUN}.yaml").read_text())
    (specs / "runs" / "hub-ports.yaml").write_text(
        yaml.safe_dump({**ports, "name": "hub-ports", "models": [model]})
    )
    result = milebench(
        specs, hub_env(olah_hub.endpoint, tmp_path / "hf-home"), "lock-weights", "--run", "hub-ports"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    repo_id = model_repo_id(load_specs().models[model])
    mirror = mirror_path(olah_hub.mirrors, "models", repo_id)
    sha = git(mirror, "rev-parse", "HEAD")
    assert load_weights_lock(specs / "locks" / "weights.lock.yaml").revisions == {model: sha}
    snapshot = Path(
        snapshot_download(repo_id, revision=sha, endpoint=olah_hub.endpoint, cache_dir=tmp_path / "cache")
    )
    assert snapshot.name == sha
    committed = git(mirror, "ls-files").splitlines()
    assert any(git(mirror, "check-attr", "filter", name).endswith("lfs") for name in committed), (
        "weights in lfs"
    )
    downloaded = sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_file())
    assert downloaded == sorted(committed)
    for name in committed:
        assert sha256_file(snapshot / name) == sha256_file(mirror / name), name


COVERAGE = ("coverage", "coverage_by_category", "column_coverage")
"""What a model's aggregate says of its coverage: counted against the fixture's own sample count in the
reference run, against the task specs' counts on hub data (which holds the fixture's samples)."""


def without_coverage(aggregate: dict[str, Any]) -> dict[str, Any]:
    models = [{k: v for k, v in m.items() if k not in COVERAGE} for m in aggregate["models"]]
    return {**aggregate, "models": models}


def test_hub_smoke_reaches_the_smoke_runs_aggregate(hub_run: HubRun, fixture_run: Path) -> None:
    reference_run = fixture_run / "results" / "smoke"
    verdict = json.loads((hub_run.out / "verdict.json").read_text())
    assert verdict == {**json.loads((reference_run / "verdict.json").read_text()), "run": RUN}
    hub = json.loads((hub_run.out / "aggregate.json").read_text())
    reference = json.loads((reference_run / "aggregate.json").read_text())
    assert without_coverage(hub) == without_coverage({**reference, "run": RUN})
    # every score is the same; coverage counts the hub's short task files against the specs' counts
    specs = load_specs()
    tasks = cast(list[str], hub_run_spec()["tasks"])
    in_specs = sum(specs.tasks[t].n_samples for t in tasks)
    for ours, theirs in zip(hub["models"], reference["models"], strict=True):
        assert ours["coverage"]["samples_scored"] == theirs["coverage"]["samples_scored"] > 0
        assert ours["coverage"]["samples_expected"] == in_specs > theirs["coverage"]["samples_expected"]
    # the weights came from the hub at the pinned commits, into the Hugging Face cache
    for model, sha in hub_run.model_commits.items():
        records = [
            read_provenance(p) for p in (hub_run.out / "predictions" / model).rglob("*.provenance.json")
        ]
        assert records and {r.weights_revision for r in records} == {sha}, model
        repo = model_repo_id(load_specs().models[model])
        assert (hub_run.hf_home / "hub" / f"models--{repo.replace('/', '--')}" / "snapshots" / sha).is_dir()
    manifest = json.loads((hub_run.out / "data" / "fetch.json").read_text())
    assert manifest["source"]["kind"] == "hub" and manifest["source"]["revision"] == hub_run.data_commit


def test_a_new_commit_to_a_model_repo_leaves_the_pinned_run_unchanged(hub_run: HubRun) -> None:
    model = next(iter(hub_run.model_commits))
    repo = mirror_path(hub_run.hub.mirrors, "models", model_repo_id(load_specs().models[model]))
    config = repo / "config.json"
    original = config.read_text()
    config.write_text(json.dumps({**json.loads(original), "vocab_size": 7}))
    new = commit(repo, "a new upload")
    assert new != hub_run.model_commits[model]
    out = snakemake(hub_run.root, hub_run.specs, RUN, hub_run.env(), "-n")
    assert "Nothing to be done" in out, out[-2000:]
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub_run.hub.endpoint)
    assert api.model_info(model_repo_id(load_specs().models[model]), revision="main").sha == new


def test_a_lock_whose_archive_changed_at_its_revision_fails_closed(hub_run: HubRun, tmp_path: Path) -> None:
    """The hub's repo gets a new commit in which one archive has other bytes of the same size; a lock that
    names that commit with the old digests is refused, naming the archive, which is quarantined, and
    nothing is extracted."""
    dataset = mirror_path(hub_run.hub.mirrors, "datasets", DATASET)
    changed = dataset / "MileBench_part1.tar.gz"
    data = changed.read_bytes()
    changed.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # the same size, other bytes
    new = commit(dataset, "a changed archive")
    specs = hub_specs(tmp_path / "specs")
    old = yaml.safe_load((hub_run.specs / "locks" / "milebench-hub.lock.yaml").read_text())
    (specs / "locks" / "milebench-hub.lock.yaml").write_text(yaml.safe_dump({**old, "revision": new}))
    result = milebench(specs, hub_run.env(), "fetch", "--run", RUN, "--root", str(tmp_path))
    error = one_error(result)
    assert "MileBench_part1.tar.gz" in error, error
    out = tmp_path / "results" / RUN
    assert not (out / "data" / "fetch.json").exists() and not (out / "data" / "MileBench").exists()
    quarantined = [p.name for p in (out / "downloads" / "quarantine").iterdir()]
    assert len(quarantined) == 1 and quarantined[0].startswith("MileBench_part1.tar.gz."), quarantined


@pytest.mark.parametrize(
    "case, expected",
    [
        ("missing dataset", "cannot read dataset kit/missing at 'main': RepositoryNotFoundError: 401"),
        ("unreachable endpoint", "cannot read dataset FreedomIntelligence/MileBench at 'main': "),
        ("denied model", f"cannot resolve model revisions on the hub: tiny-llava ({DENIED} at 'main'): "),
        ("missing model", "cannot resolve model revisions on the hub: tiny-llava (kit/missing at 'main'): "),
        ("missing archive", "MileBench_part9.tar.gz"),
    ],
)
def test_each_hub_failure_is_one_named_error(
    hub_run: HubRun, tmp_path: Path, case: str, expected: str
) -> None:
    specs = hub_specs(tmp_path / "specs")
    env = hub_run.env()
    if case == "missing dataset":
        result = milebench(
            specs, env, "lock-data", "--repo-id", "kit/missing", "--out", str(tmp_path / "l.yaml")
        )
    elif case == "unreachable endpoint":
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"
        result = milebench(specs, env, "lock-data", "--out", str(tmp_path / "l.yaml"))
    elif case == "missing archive":
        lock = yaml.safe_load((hub_run.specs / "locks" / "milebench-hub.lock.yaml").read_text())
        lock["archives"][-1]["name"] = "MileBench_part9.tar.gz"
        (specs / "locks" / "milebench-hub.lock.yaml").write_text(yaml.safe_dump(lock))
        result = milebench(specs, env, "fetch", "--run", RUN, "--root", str(tmp_path))
    else:
        spec = specs / "models" / "tiny-llava.yaml"
        data = yaml.safe_load(spec.read_text())
        data["weights"]["repo_id"] = DENIED if case == "denied model" else "kit/missing"
        spec.write_text(yaml.safe_dump(data))
        result = milebench(specs, env, "lock-weights", "--run", RUN)
    error = one_error(result)
    assert expected in error, error
    if case in ("denied model", "missing model", "missing dataset"):
        assert "RepositoryNotFoundError: 401 Client Error" in error, error


def test_offline_the_whole_run_reruns_from_the_cache(hub_run: HubRun) -> None:
    """HF_HUB_OFFLINE=1 with the endpoint unreachable: nothing to plan after the complete run, and the
    whole run forced again reaches the same aggregate from the downloads and the Hugging Face cache."""
    env = hub_run.env(HF_HUB_OFFLINE="1", HF_ENDPOINT=f"http://127.0.0.1:{free_port()}")
    before = (hub_run.out / "aggregate.json").read_bytes()
    out = snakemake(hub_run.root, hub_run.specs, RUN, env, "-n")
    assert "Nothing to be done" in out, out[-2000:]
    out = snakemake(hub_run.root, hub_run.specs, RUN, env, "--forceall")
    assert "infer_model_multi_image" in out and "fetch" in out
    assert json.loads((hub_run.out / "aggregate.json").read_bytes()) == json.loads(before)
    out = snakemake(hub_run.root, hub_run.specs, RUN, env, "-n")
    assert "Nothing to be done" in out, out[-2000:]


def test_archive_takes_the_data_and_the_weights_from_the_cache(hub_run: HubRun, tmp_path: Path) -> None:
    env = hub_run.env(HF_HUB_OFFLINE="1", HF_ENDPOINT=f"http://127.0.0.1:{free_port()}")
    bundle = tmp_path / "bundle"
    result = milebench(
        hub_run.specs,
        env,
        "archive",
        "--run",
        RUN,
        "--root",
        str(hub_run.root),
        "--out",
        str(bundle),
        "--with-data",
        "--with-weights",
        "--no-images",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lock = load_lock(hub_run.specs / "locks" / "milebench-hub.lock.yaml")
    for entry in lock.archives:
        assert sha256_file(bundle / "run" / "results" / RUN / "downloads" / entry.name) == entry.sha256
    for model, sha in hub_run.model_commits.items():
        repo = model_repo_id(load_specs().models[model])
        snapshot = bundle / "weights" / "hub" / f"models--{repo.replace('/', '--')}" / "snapshots" / sha
        assert (snapshot / "config.json").is_file() and list(snapshot.glob("*.safetensors")), model
