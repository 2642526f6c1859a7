"""fetch_run end to end: verified, fail-closed, idempotent; lock-data with a stand-in hub API."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from fetch_helpers import RangeServer, link_member, tar_gz, write_lock
from test_score_command import paths_of, specs_dir  # noqa: F401

from milebench.benchmarks.milebench.data import commands, hub_lock
from milebench.benchmarks.milebench.data.extract import ExtractLimits, RefusedArchiveError, marker_path
from milebench.benchmarks.milebench.data.fetch import fetch_run
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.data_lock import load_lock
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import (
    FixtureSource,
    HubSource,
    LocalSource,
    MirrorSource,
    RunSpec,
)
from milebench.data.errors import FetchError
from milebench.data.verify import VerificationError
from milebench.hub import hub_errors
from milebench.spec.base import SpecError
from milebench.spec.pinned_file import ArchiveEntry
from milebench.stage_inputs import MissingInput

ARCHIVES = {
    "MileBench_part0.tar.gz": tar_gz(
        {"MileBench/TaskA/TaskA.json": b"{}", "MileBench/TaskA/images/1.jpg": b"a"}
    ),
    "MileBench_part1.tar.gz": tar_gz(
        {"MileBench/TaskB/TaskB.json": b"{}", "MileBench/TaskB/images/1.jpg": b"b"}
    ),
}
LOCK = "locks/test.lock.yaml"


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "HF_TOKEN",
    ):
        monkeypatch.delenv(var, raising=False)


def setup(tmp_path: Path, data: object) -> tuple[Specs, RunSpec, RunPaths]:
    run = RunSpec(name="t", description="test", models=("m",), data=data, output_dir=str(tmp_path / "out"))
    specs = Specs(root=tmp_path / "specs", tasks={}, models={}, runs={"t": run})
    return specs, run, RunPaths.for_run(run)


def mirror_run(tmp_path: Path, server: RangeServer) -> tuple[Specs, RunSpec, RunPaths]:
    write_lock(tmp_path / "specs" / LOCK, ARCHIVES)
    return setup(tmp_path, MirrorSource(kind="mirror", url=server.url(), lock=LOCK))


def tree_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_mirror_fetch_extracts_and_writes_manifest(tmp_path: Path) -> None:
    with RangeServer(ARCHIVES) as server:
        specs, run, paths = mirror_run(tmp_path, server)
        manifest = fetch_run(specs, run, paths)
    assert tree_files(paths.data_root) == [
        "TaskA/TaskA.json",
        "TaskA/images/1.jpg",
        "TaskB/TaskB.json",
        "TaskB/images/1.jpg",
    ]
    assert json.loads(paths.fetch_manifest.read_text()) == manifest
    assert manifest["source"]["kind"] == "mirror" and manifest["source"]["url"] == server.url()
    assert [(a["name"], a["size"], a["sha256"]) for a in manifest["archives"]] == [
        (name, len(data), hashlib.sha256(data).hexdigest()) for name, data in ARCHIVES.items()
    ]
    assert manifest["started"] <= manifest["finished"]


def test_rerun_is_a_no_op(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with RangeServer(ARCHIVES) as server:
        specs, run, paths = mirror_run(tmp_path, server)
        fetch_run(specs, run, paths)
        markers = sorted((paths.out / "data" / ".extracted").iterdir())
        before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in [*markers, paths.fetch_manifest]}
        server.requests.clear()
        caplog.set_level(logging.INFO)
        fetch_run(specs, run, paths)
    assert server.requests == []
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before
    assert sorted((paths.out / "data" / ".extracted").iterdir()) == markers
    assert "nothing to do" in caplog.text


def test_missing_tree_is_refetched_from_verified_downloads(tmp_path: Path) -> None:
    with RangeServer(ARCHIVES) as server:
        specs, run, paths = mirror_run(tmp_path, server)
        fetch_run(specs, run, paths)
        shutil.rmtree(paths.data_root)
        server.requests.clear()
        fetch_run(specs, run, paths)
    assert server.requests == []
    assert (paths.data_root / "TaskA" / "TaskA.json").is_file()


def test_corrupt_archive_is_quarantined_and_nothing_extracted(tmp_path: Path) -> None:
    name = "MileBench_part1.tar.gz"
    good = ARCHIVES[name]
    corrupt = good[:-10] + bytes(b ^ 0xFF for b in good[-10:])
    with RangeServer({**ARCHIVES, name: corrupt}) as server:
        specs, run, paths = mirror_run(tmp_path, server)
        with pytest.raises(VerificationError) as err:
            fetch_run(specs, run, paths)
    message = str(err.value)
    quarantined = list((paths.downloads / "quarantine").iterdir())
    assert len(quarantined) == 1 and quarantined[0].name.startswith(f"{name}.")
    assert quarantined[0].read_bytes() == corrupt
    assert name in message and str(quarantined[0]) in message
    assert hashlib.sha256(good).hexdigest() in message and hashlib.sha256(corrupt).hexdigest() in message
    assert not (paths.downloads / name).exists()
    assert not paths.data_root.exists()
    assert not paths.fetch_manifest.exists()


def refused_fetch(tmp_path: Path, bad: bytes, **kwargs: object) -> tuple[RunPaths, str, Path]:
    """Fetch a mirror whose second archive is ``bad`` (and locked as such); the error and the copy."""
    name = "MileBench_part1.tar.gz"
    archives = {**ARCHIVES, name: bad}
    write_lock(tmp_path / "specs" / LOCK, archives)
    with RangeServer(archives) as server:
        specs, run, paths = setup(tmp_path, MirrorSource(kind="mirror", url=server.url(), lock=LOCK))
        with pytest.raises(RefusedArchiveError) as err:
            fetch_run(specs, run, paths, **kwargs)
    quarantined = list((paths.downloads / "quarantine").iterdir())
    assert len(quarantined) == 1 and quarantined[0].read_bytes() == bad
    message = str(err.value)
    assert name in message and str(quarantined[0]) in message
    assert not (paths.downloads / name).exists()
    assert not (paths.data_root / "TaskB").exists()
    assert not paths.fetch_manifest.exists()
    return paths, message, quarantined[0]


def test_archive_holding_a_link_is_quarantined_and_nothing_of_it_extracted(tmp_path: Path) -> None:
    link = link_member("MileBench/TaskB/images/2.jpg", "1.jpg", tarfile.SYMTYPE)
    bad = tar_gz({"MileBench/TaskB/TaskB.json": b"{}", "MileBench/TaskB/images/1.jpg": b"b"}, [link])
    _, message, _ = refused_fetch(tmp_path, bad)
    assert "MileBench/TaskB/images/2.jpg" in message and "symlink" in message


def test_truncated_archive_that_matches_the_lock_is_a_clear_error(tmp_path: Path) -> None:
    whole = tar_gz({"MileBench/TaskB/TaskB.json": b"{}", "MileBench/TaskB/images/1.jpg": bytes(300_000)})
    _, message, _ = refused_fetch(tmp_path, whole[: len(whole) // 2])
    assert "truncated" in message


def test_expansion_past_the_cap_leaves_no_manifest_and_a_rerun_recovers(tmp_path: Path) -> None:
    bomb = tar_gz({"MileBench/TaskB/TaskB.json": b"{}", "MileBench/TaskB/images/1.jpg": bytes(4 << 20)})
    paths, message, _ = refused_fetch(tmp_path, bomb, limits=ExtractLimits(max_ratio=50, min_cap_bytes=0))
    assert "over the cap" in message
    with RangeServer({**ARCHIVES, "MileBench_part1.tar.gz": bomb}) as server:
        specs, run, paths = setup(tmp_path, MirrorSource(kind="mirror", url=server.url(), lock=LOCK))
        fetch_run(specs, run, paths)
    assert (paths.data_root / "TaskB" / "images" / "1.jpg").stat().st_size == 4 << 20
    assert paths.fetch_manifest.is_file()


def test_not_enough_free_space_keeps_the_verified_download(tmp_path: Path) -> None:
    with RangeServer(ARCHIVES) as server:
        specs, run, paths = mirror_run(tmp_path, server)
        with pytest.raises(FetchError, match="not enough free space") as err:
            fetch_run(specs, run, paths, limits=ExtractLimits(keep_free_bytes=1 << 62))
    assert not isinstance(err.value, RefusedArchiveError)
    assert not (paths.downloads / "quarantine").exists()
    assert sorted(p.name for p in paths.downloads.iterdir()) == sorted(ARCHIVES)
    assert not paths.fetch_manifest.exists()


@pytest.mark.parametrize(
    "name",
    [".", "..", "../x.tar.gz", "a/b.tar.gz", "/abs.tar.gz", ".hidden.tar.gz", "a.tar.gz.part", "quarantine"],
)
def test_lock_accepts_plain_file_names_only(tmp_path: Path, name: str) -> None:
    lock_path = tmp_path / "lock.yaml"
    lock_path.write_text(f"archives:\n  - name: '{name}'\n    size: 10\n    sha256: '{'0' * 64}'\n")
    with pytest.raises(SpecError) as err:
        load_lock(lock_path)
    assert err.value.path == lock_path and err.value.problems[0][0] == "archives.0.name"
    assert ArchiveEntry(name="MileBench_part0.tar.gz").name == "MileBench_part0.tar.gz"


def test_stale_download_from_an_older_lock_is_quarantined_and_replaced(tmp_path: Path) -> None:
    with RangeServer(ARCHIVES) as server:
        specs, run, paths = mirror_run(tmp_path, server)
        paths.downloads.mkdir(parents=True)
        (paths.downloads / "MileBench_part0.tar.gz").write_bytes(b"an older archive")
        fetch_run(specs, run, paths)
    assert [r["path"] for r in server.requests] == ["/MileBench_part0.tar.gz", "/MileBench_part1.tar.gz"]
    assert [p.read_bytes() for p in (paths.downloads / "quarantine").iterdir()] == [b"an older archive"]
    assert (paths.downloads / "MileBench_part0.tar.gz").read_bytes() == ARCHIVES["MileBench_part0.tar.gz"]
    assert paths.fetch_manifest.is_file()


def test_null_sha256_in_lock_is_refused_before_any_download(tmp_path: Path) -> None:
    lock_path = tmp_path / "specs" / LOCK
    lock_path.parent.mkdir(parents=True)
    lock_path.write_text("archives:\n  - name: MileBench_part0.tar.gz\n    size: 10\n    sha256: null\n")
    with RangeServer(ARCHIVES) as server:
        specs, run, paths = setup(tmp_path, MirrorSource(kind="mirror", url=server.url(), lock=LOCK))
        with pytest.raises(SpecError) as err:
            fetch_run(specs, run, paths)
    assert err.value.path == lock_path
    assert "archives.0.sha256" in str(err.value) and str(lock_path) in str(err.value)
    assert server.requests == []
    assert not paths.out.exists()


def test_hub_source_uses_resolve_urls_and_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    revision = "a" * 40
    files = {f"datasets/org/MileBench/resolve/{revision}/{n}": d for n, d in ARCHIVES.items()}
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    with RangeServer(files) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url())
        write_lock(tmp_path / "specs" / LOCK, ARCHIVES, repo_id="org/MileBench", revision=revision)
        specs, run, paths = setup(tmp_path, HubSource(kind="hub", lock=LOCK))
        manifest = fetch_run(specs, run, paths)
    assert [r["path"] for r in server.requests] == [f"/{p}" for p in files]
    assert all(r["Authorization"] == "Bearer hf_test" for r in server.requests)
    assert manifest["source"]["repo_id"] == "org/MileBench" and manifest["source"]["revision"] == revision
    assert "hf_test" not in paths.fetch_manifest.read_text()
    assert (paths.data_root / "TaskB" / "TaskB.json").is_file()


def test_offline_a_hub_fetch_takes_verified_downloads_and_asks_the_hub_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    revision = "a" * 40
    files = {f"datasets/org/MileBench/resolve/{revision}/{n}": d for n, d in ARCHIVES.items()}
    write_lock(tmp_path / "specs" / LOCK, ARCHIVES, repo_id="org/MileBench", revision=revision)
    specs, run, paths = setup(tmp_path, HubSource(kind="hub", lock=LOCK))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with RangeServer(files) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url())
        with pytest.raises(FetchError) as err:
            fetch_run(specs, run, paths)
        assert server.requests == []
        first = next(iter(ARCHIVES))
        assert str(err.value).startswith(f"{first}: no verified copy in {paths.downloads} and HF_HUB_OFFLINE")
        paths.downloads.mkdir(parents=True)
        for name, data in ARCHIVES.items():
            (paths.downloads / name).write_bytes(data)
        fetch_run(specs, run, paths)
        assert server.requests == []
    assert (paths.data_root / "TaskB" / "TaskB.json").is_file()


@pytest.mark.parametrize(
    ("repo_id", "revision", "problem"),
    [
        (None, "a" * 40, "repo_id: a hub source needs the dataset repo id"),
        (
            "org/MileBench",
            None,
            "revision: not resolved; run `milebench lock-data` where the hub is reachable",
        ),
    ],
)
def test_a_hub_lock_without_its_repo_or_revision_is_refused_by_name(
    tmp_path: Path, repo_id: str | None, revision: str | None, problem: str
) -> None:
    lock = write_lock(tmp_path / "specs" / LOCK, ARCHIVES, repo_id=repo_id, revision=revision)
    specs, run, paths = setup(tmp_path, HubSource(kind="hub", lock=LOCK))
    with pytest.raises(SpecError) as err:
        fetch_run(specs, run, paths)
    assert str(err.value) == f"{lock}: {problem}"
    assert not paths.data_root.exists()


def test_a_mirror_body_longer_than_the_lock_says_is_cut_off_not_kept(tmp_path: Path) -> None:
    name = "MileBench_part1.tar.gz"
    with RangeServer({**ARCHIVES, name: ARCHIVES[name] + b"more"}) as server:
        specs, run, paths = mirror_run(tmp_path, server)
        with pytest.raises(FetchError) as err:
            fetch_run(specs, run, paths)
    size = len(ARCHIVES[name])
    assert str(
        err.value
    ) == f"{server.url(name)}: more than the expected {size} bytes (the lock's size); " + (
        "nothing of it is kept"
    )
    assert not (paths.downloads / name).exists() and not paths.data_root.exists()


def test_a_mirror_url_ending_in_a_slash_names_each_archive_once(tmp_path: Path) -> None:
    with RangeServer(ARCHIVES) as server:
        write_lock(tmp_path / "specs" / LOCK, ARCHIVES)
        base = server.url().rstrip("/")
        specs, run, paths = setup(tmp_path, MirrorSource(kind="mirror", url=f"{base}/", lock=LOCK))
        manifest = fetch_run(specs, run, paths)
    assert [a["url"] for a in manifest["archives"]] == [f"{base}/{name}" for name in ARCHIVES]


def test_fixture_source_reads_the_run_mirror(tmp_path: Path) -> None:
    specs, run, paths = setup(tmp_path, FixtureSource(kind="fixture"))
    with pytest.raises(MissingInput) as missing:
        fetch_run(specs, run, paths)
    assert str(missing.value) == (
        f"{paths.mirror / 'milebench.lock.yaml'}: fixture lock not found; run `milebench fixture --out "
        f"{paths.mirror}` first"
    )
    paths.mirror.mkdir(parents=True)
    for name, data in ARCHIVES.items():
        (paths.mirror / name).write_bytes(data)
    write_lock(paths.mirror / "milebench.lock.yaml", ARCHIVES)
    manifest = fetch_run(specs, run, paths)
    assert manifest["source"]["kind"] == "fixture" and manifest["source"]["path"] == str(paths.mirror)
    assert (paths.data_root / "TaskA" / "images" / "1.jpg").read_bytes() == b"a"


def test_fetch_command_fetches_the_named_run_and_fails_on_a_refused_archive(
    specs_dir: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run with a relative output folder is fetched under --root, wherever the command runs."""
    monkeypatch.chdir(specs_dir.parent)
    run_yaml = specs_dir / "runs" / "t.yaml"
    run_yaml.write_text(yaml.safe_dump(yaml.safe_load(run_yaml.read_text()) | {"output_dir": "results/t"}))
    staged = specs_dir.parent / "staged"
    paths = RunPaths.for_run(RunSpec.model_validate(yaml.safe_load(run_yaml.read_text())), base=staged)
    paths.mirror.mkdir(parents=True)
    write_lock(paths.mirror / "milebench.lock.yaml", ARCHIVES)
    corrupt = {**ARCHIVES, "MileBench_part1.tar.gz": ARCHIVES["MileBench_part0.tar.gz"]}
    args = argparse.Namespace(specs=specs_dir, run="t", root=staged, download_deadline=60.0)
    for archives, code in ((corrupt, 1), (ARCHIVES, 0)):
        for name, data in archives.items():
            (paths.mirror / name).write_bytes(data)
        assert commands.fetch(args) == code
    [error] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert error.startswith("archive MileBench_part1.tar.gz failed verification: expected size 149")
    assert (
        staged / "results" / "t" / "data" / "MileBench" / "TaskB" / "images" / "1.jpg"
    ).read_bytes() == b"b"


def test_fetch_command_names_the_run_spec_of_a_missing_local_tree(specs_dir: Path) -> None:  # noqa: F811
    run_yaml = specs_dir / "runs" / "t.yaml"
    missing = specs_dir.parent / "nope"
    run = yaml.safe_load(run_yaml.read_text())
    run_yaml.write_text(yaml.safe_dump(run | {"data": {"kind": "local", "path": str(missing)}}))
    args = argparse.Namespace(specs=specs_dir, run="t", root=Path("."), download_deadline=60.0)
    with pytest.raises(SpecError) as err:
        commands.fetch(args)
    assert str(err.value) == f"{run_yaml}: data.path: no such folder: {missing}"


def test_local_source_links_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "elsewhere" / "MileBench"
    (tree / "TaskA").mkdir(parents=True)
    specs, run, paths = setup(tmp_path, LocalSource(kind="local", path=str(tree)))
    manifest = fetch_run(specs, run, paths)
    assert paths.data_root.is_symlink() and paths.data_root.resolve() == tree.resolve()
    assert manifest["source"] == {"kind": "local", "path": str(tree.resolve())}
    assert manifest["archives"] == []


def test_a_run_pointed_at_another_local_tree_links_the_new_one(tmp_path: Path) -> None:
    trees = [tmp_path / name / "MileBench" for name in ("first", "second")]
    for tree in trees:
        tree.mkdir(parents=True)
        fetch_run(*setup(tmp_path, LocalSource(kind="local", path=str(tree))))
    assert setup(tmp_path, LocalSource(kind="local", path=str(trees[1])))[2].data_root.resolve() == (
        trees[1].resolve()
    )


def test_local_source_missing_names_the_field(tmp_path: Path) -> None:
    specs, run, paths = setup(tmp_path, LocalSource(kind="local", path=str(tmp_path / "nope")))
    with pytest.raises(SpecError) as err:
        fetch_run(specs, run, paths)
    assert err.value.path == tmp_path / "specs" / "runs" / "t.yaml"
    assert err.value.problems[0][0] == "data.path"


def test_switching_from_local_to_archives_never_writes_into_the_linked_tree(tmp_path: Path) -> None:
    tree = tmp_path / "elsewhere" / "MileBench"
    (tree / "Keep").mkdir(parents=True)
    (tree / "Keep" / "k.json").write_text("{}")
    specs, run, paths = setup(tmp_path, LocalSource(kind="local", path=str(tree)))
    fetch_run(specs, run, paths)
    with RangeServer(ARCHIVES) as server:
        specs, run, paths = mirror_run(tmp_path, server)
        manifest = fetch_run(specs, run, paths)
    assert tree_files(tree) == ["Keep/k.json"]
    assert not paths.data_root.is_symlink()
    assert tree_files(paths.data_root)[0] == "TaskA/TaskA.json"
    assert manifest["source"]["kind"] == "mirror"


def test_new_lock_replaces_the_old_tree(tmp_path: Path) -> None:
    with RangeServer(ARCHIVES) as server:
        specs, run, paths = mirror_run(tmp_path, server)
        fetch_run(specs, run, paths)
    other = {"Other_part0.tar.gz": tar_gz({"MileBench/TaskC/TaskC.json": b"{}"})}
    with RangeServer(other) as server:
        write_lock(tmp_path / "specs" / LOCK, other)
        specs, run, paths = setup(tmp_path, MirrorSource(kind="mirror", url=server.url(), lock=LOCK))
        fetch_run(specs, run, paths)
    assert tree_files(paths.data_root) == ["TaskC/TaskC.json"]
    sha = hashlib.sha256(other["Other_part0.tar.gz"]).hexdigest()
    assert [p.name for p in (paths.out / "data" / ".extracted").iterdir()] == [
        marker_path(paths.out / "data", "Other_part0.tar.gz", sha).name
    ]


@dataclass
class FakeLfs:
    size: int
    sha256: str


@dataclass
class FakeFile:
    path: str
    size: int | None
    lfs: FakeLfs | None


@dataclass
class FakeInfo:
    sha: str


class FakeApi:
    """The hub's revision lookup and file tree: what lock-data reads."""

    def __init__(self, files: list[FakeFile]):
        self.files = files
        self.calls: list[tuple[str, str, str | None]] = []

    def dataset_info(self, repo_id: str, *, revision: str | None = None) -> FakeInfo:
        self.calls.append(("info", repo_id, revision))
        return FakeInfo(sha="c" * 40)

    def list_repo_tree(
        self, repo_id: str, *, revision: str | None = None, repo_type: str | None = None
    ) -> list[FakeFile]:
        assert repo_type == "dataset"
        self.calls.append(("tree", repo_id, revision))
        return self.files


def _lfs_file(name: str, n: int) -> FakeFile:
    return FakeFile(name, n, FakeLfs(n, hashlib.sha256(name.encode()).hexdigest()))


def test_hub_lock_writes_a_complete_lock(tmp_path: Path) -> None:
    files = [
        FakeFile("README.md", 10, None),
        _lfs_file("MileBench_part10.tar.gz", 30),
        _lfs_file("MileBench_part2.tar.gz", 20),
        FakeFile(".gitattributes", 5, None),
    ]
    api = FakeApi(files)
    out = tmp_path / "locks" / "hub.lock.yaml"
    hub_lock.write_hub_lock("FreedomIntelligence/MileBench", "main", out, api=api)
    lock = load_lock(out)
    assert api.calls == [
        ("info", "FreedomIntelligence/MileBench", "main"),
        ("tree", "FreedomIntelligence/MileBench", "c" * 40),
    ]
    assert lock.repo_id == "FreedomIntelligence/MileBench" and lock.revision == "c" * 40
    assert lock.note == "resolved from revision 'main' by `milebench lock-data`"
    assert [(a.name, a.size, a.sha256) for a in lock.archives] == [
        ("MileBench_part2.tar.gz", 20, hashlib.sha256(b"MileBench_part2.tar.gz").hexdigest()),
        ("MileBench_part10.tar.gz", 30, hashlib.sha256(b"MileBench_part10.tar.gz").hexdigest()),
    ]


def test_hub_lock_errors_name_the_dataset_the_revision_and_its_commit(tmp_path: Path) -> None:
    where = f"dataset o/d at 'main' (commit {'c' * 40})"
    cases = [
        ([FakeFile("README.md", 10, None)], f"{where}: no MileBench_part*.tar.gz archives"),
        (
            [FakeFile("MileBench_part0.tar.gz", 11, FakeLfs(10, "0" * 64))],
            f"{where}: MileBench_part0.tar.gz size 11 != LFS size 10",
        ),
    ]
    for files, message in cases:
        with pytest.raises(FetchError) as err:
            hub_lock.write_hub_lock("o/d", "main", tmp_path / "hub.lock.yaml", api=FakeApi(files))
        assert str(err.value) == message


def test_an_archive_the_hub_lists_without_a_size_takes_its_lfs_size(tmp_path: Path) -> None:
    api = FakeApi([FakeFile("MileBench_part0.tar.gz", None, FakeLfs(10, "0" * 64))])
    lock = hub_lock.write_hub_lock("o/d", "main", tmp_path / "hub.lock.yaml", api=api)
    assert [(a.name, a.size) for a in lock.archives] == [("MileBench_part0.tar.gz", 10)]


def test_hub_lock_refuses_archives_without_lfs_metadata(tmp_path: Path) -> None:
    api = FakeApi([FakeFile("MileBench_part0.tar.gz", 10, None)])
    out = tmp_path / "hub.lock.yaml"
    with pytest.raises(FetchError, match=r"MileBench_part0\.tar\.gz has no LFS metadata"):
        hub_lock.write_hub_lock("o/d", "main", out, api=api)
    assert not out.exists()


def test_lock_command_uses_the_hub_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeApi([_lfs_file("MileBench_part0.tar.gz", 7)])
    monkeypatch.setattr(hub_lock, "HfApi", lambda: api)
    out = tmp_path / "hub.lock.yaml"
    assert hub_lock.lock(argparse.Namespace(repo_id="o/d", revision="v1", out=out)) == 0
    assert api.calls == [("info", "o/d", "v1"), ("tree", "o/d", "c" * 40)]
    assert load_lock(out).archives[0].size == 7
    monkeypatch.setattr(hub_lock, "HfApi", lambda: FakeApi([]))
    assert hub_lock.lock(argparse.Namespace(repo_id="o/d", revision="v1", out=tmp_path / "none.yaml")) == 1


def test_lock_command_on_an_unreachable_hub_fails_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class DownApi:
        def dataset_info(self, repo_id: str, **_: object) -> FakeInfo:
            raise hub_errors()[-1]("Name or service not known")

    monkeypatch.setattr(hub_lock, "HfApi", DownApi)
    out = tmp_path / "hub.lock.yaml"
    assert hub_lock.lock(argparse.Namespace(repo_id="o/d", revision="v1", out=out)) == 1
    assert not out.exists()
    with pytest.raises(FetchError) as err:
        hub_lock.write_hub_lock("o/d", "v1", out, api=DownApi())
    down = hub_errors()[-1].__name__
    assert str(err.value) == f"cannot read dataset o/d at 'v1': {down}: Name or service not known"
