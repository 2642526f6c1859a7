"""Artifact bundles without a Docker engine: what a bundle holds, that every file matches its manifest,
that archiving twice gives the same bytes, that tampering is caught and named, and the RO-Crate.

A small real run (Random and the tiny LLaVA on two tasks, the session's ``audited_run``) goes through
Snakemake once; the bundles here leave the images out (``--no-images``), so ``verify --only hashes``
checks them. The images, re-scoring and re-running are tested against a real engine in
``test_archive_docker.py``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest
import yaml
from pipeline_runs import AUDITED_RUN, run_config, snakemake
from pipeline_runs import archive as archive_run

from milebench import cli
from milebench.archive.contents import files_under
from milebench.archive.images import archive_problems
from milebench.archive.manifest import MANIFEST, BundleError
from milebench.archive.reader import read_manifest
from milebench.archive.tarball import write_tarball
from milebench.archive.weights import hub_snapshot
from milebench.archive.workspace import open_workspace
from milebench.benchmarks.milebench.archive.hooks import BUNDLES
from milebench.benchmarks.milebench.archive.rerun import choose, plan
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.io import sha256_file
from milebench.provenance import KIT_ROOT
from milebench.spec.benchmark import benchmarks

RUN = AUDITED_RUN


@pytest.fixture
def run_root(audited_run: Path) -> Path:
    """The run archived here (``conftest.py``): read, never changed."""
    return audited_run


@pytest.fixture
def bundle(audited_bundle: Path) -> Path:
    """Its bundle with data and weights, and ``bundle.tar`` beside it (``conftest.py``): tests that
    tamper work on a copy."""
    return audited_bundle


def archive(root: Path, out: Path, *options: str) -> int:
    return archive_run(root, RUN, out, *options)


def verify_hashes(bundle: Path) -> int:
    return cli.main(["verify", str(bundle), "--only", "hashes"])


def copy_of(bundle: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "bundle"
    shutil.copytree(bundle, dest)
    return dest


@pytest.mark.slow
def test_bundle_holds_the_run_its_specs_source_data_and_weights(bundle: Path, run_root: Path) -> None:
    manifest = read_manifest(bundle)
    by_path = {e.path: e for e in manifest.files}
    out = f"run/results/{RUN}"
    expected = {
        f"{out}/predictions/random/multi-image/ActionSequence.jsonl": "prediction",
        f"{out}/predictions/tiny-llava/multi-image/ActionSequence.jsonl.provenance.json": "provenance",
        f"{out}/journal/tiny-llava/multi-image/TextNeedleInAHaystack.jsonl": "journal",
        f"{out}/scores/random/multi-image/TextNeedleInAHaystack.jsonl": "judgment",
        f"{out}/scores/random/multi-image/TextNeedleInAHaystack.json": "task-score",
        f"{out}/aggregate.json": "aggregate",
        f"{out}/verdict.json": "verdict",
        f"{out}/data/fetch.json": "fetch-manifest",
        f"{out}/mirror/milebench.lock.yaml": "lock",
        f"{out}/downloads/MileBench_part0.tar.gz": "data-archive",
        f"{out}/models/tiny-llava/model.safetensors": "weights",
        f"run/reports/{RUN}/report.html": "report",
        f"run/reports/{RUN}/report.tex": "report",
        f"specs/runs/{RUN}.yaml": "run-spec",
        "specs/models/tiny-llava.yaml": "spec",
        "specs/locks/weights.lock.yaml": "lock",
        "source/Snakefile": "workflow",
        "source/milebench/benchmarks/milebench/rules.smk": "workflow",
        "source/rules/common.smk": "workflow",
        "ro-crate-metadata.json": "crate",
    }
    assert {p: by_path[p].role for p in expected if p in by_path} == expected
    assert any(p.startswith(f"run/reports/{RUN}/figures/") for p in by_path)
    # Caches and bulk that re-creating the run makes anyway stay out.
    assert not [p for p in by_path if "/data/MileBench/" in p or p.endswith(".lock") or "/." in p]
    assert not [p for p in by_path if p.startswith((f"{out}/benchmarks/", f"{out}/mirror/MileBench_"))]
    # Every file is on disk with the size and sha256 the manifest says, and nothing else is.
    on_disk = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()} - {MANIFEST}
    assert on_disk == set(by_path)
    assert all(sha256_file(bundle / e.path) == e.sha256 and (bundle / e.path).stat().st_size == e.size
               for e in manifest.files)  # fmt: skip
    # The kit's source is `git archive` of the commit the jobs recorded; the data archives match the lock.
    (commit,) = manifest.kit_commits
    git = subprocess.run(["git", "-C", str(KIT_ROOT), "archive", "--format=tar", commit], capture_output=True)
    assert (bundle / "source" / f"{commit}.tar").read_bytes() == git.stdout
    lock = yaml.safe_load(
        (run_root / out.removeprefix("run/") / "mirror" / "milebench.lock.yaml").read_text()
    )
    for archive_entry in lock["archives"]:
        assert by_path[f"{out}/downloads/{archive_entry['name']}"].sha256 == archive_entry["sha256"]
    assert by_path[f"{out}/aggregate.json"].produced_by == f"milebench aggregate --run {RUN}"
    assert by_path[f"{out}/aggregate.json"].backs == ("Results Reproduced",)


@pytest.mark.slow
def test_hashes_pass_and_only_the_available_badge_is_granted_without_images(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert verify_hashes(bundle) == 0
    text = capsys.readouterr().out
    manifest = read_manifest(bundle)
    assert f"| hashes | passed | {len(manifest.files)} of {len(manifest.files)} files match" in text
    assert "| Available | yes |" in text
    assert "| Functional | no |" in text and "| Results Reproduced | no |" in text


@pytest.mark.slow
def test_archiving_twice_gives_byte_identical_bundles(run_root: Path, bundle: Path, tmp_path: Path) -> None:
    again = tmp_path / "bundle"
    assert archive(run_root, again, "--with-data", "--with-weights", "--tarball") == 0
    first, second = bundle.with_name("bundle.tar"), again.with_name("bundle.tar")
    assert sha256_file(first) == sha256_file(second)
    assert sha256_file(bundle / MANIFEST) == sha256_file(again / MANIFEST)
    with tarfile.open(first) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names[0] == "bundle" and names[1:] == sorted(names[1:])
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}


def tamper_prediction(bundle: Path) -> str:
    path = f"run/results/{RUN}/predictions/random/multi-image/ActionSequence.jsonl"
    rows = (bundle / path).read_text().splitlines()
    row = json.loads(rows[0])
    rows[0] = json.dumps({**row, "response": "Z" if row["response"] != "Z" else "Y"})
    (bundle / path).write_text("\n".join(rows) + "\n")
    return f"{path}: altered (prediction;"


def tamper_missing(bundle: Path) -> str:
    path = f"run/results/{RUN}/scores/tiny-llava/multi-image/ActionSequence.json"
    (bundle / path).unlink()
    return f"{path}: missing (task-score,"


def tamper_spec(bundle: Path) -> str:
    path = "specs/models/random.yaml"
    (bundle / path).write_text((bundle / path).read_text().replace("seed: 0", "seed: 1") + "# edited\n")
    return f"{path}: altered (spec;"


def tamper_extra(bundle: Path) -> str:
    (bundle / "run" / "extra.txt").write_text("planted\n")
    return "run/extra.txt: not in the manifest"


@pytest.mark.slow
@pytest.mark.parametrize("tamper", [tamper_prediction, tamper_missing, tamper_spec, tamper_extra])
def test_tampering_is_caught_named_in_one_line_and_exits_non_zero(
    tamper, bundle: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = copy_of(bundle, tmp_path)
    expected = tamper(copy)
    with caplog.at_level(logging.ERROR):
        assert verify_hashes(copy) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith(f"hashes failed: {expected}"), errors
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err and "| Available | no |" in printed.out


@pytest.mark.slow
def test_archive_refuses_an_existing_folder_and_an_unfinished_run(
    run_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    with caplog.at_level(logging.ERROR):
        assert archive(run_root, taken) == 1
    assert f"{taken}: already exists" in caplog.text
    unfinished = tmp_path / "unfinished"
    shutil.copytree(run_root / "specs", unfinished / "specs")
    shutil.copytree(run_root / "results", unfinished / "results")
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert archive(unfinished, tmp_path / "b") == 1
    assert (
        f"reports/{RUN}/report.html: the run's report not found; run `milebench report --run {RUN}` first"
        in (caplog.text)
    )
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob(".b.*"))
    caplog.clear()
    argv = ["--specs", str(run_root / "specs"), "archive", "--run", RUN, "--root", str(run_root)]
    with caplog.at_level(logging.ERROR):
        assert cli.main([*argv, "--out", str(tmp_path / "c")]) == 1  # images asked for, none recorded
    assert "results/images/hf-current.json: no image recorded for family hf-current" in caplog.text
    assert "or archive with --no-images" in caplog.text and not (tmp_path / "c").exists()


def test_verify_names_a_folder_that_is_no_bundle(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert cli.main(["verify", str(tmp_path)]) == 2  # refused as given
    assert f"{tmp_path / MANIFEST}: missing: not a bundle" in caplog.text


@pytest.mark.slow
def test_verify_takes_the_tarball_as_the_folder_and_catches_a_tampered_one(
    bundle: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    assert verify_hashes(bundle) == 0
    from_folder = capsys.readouterr().out
    assert verify_hashes(bundle.with_name("bundle.tar")) == 0
    assert capsys.readouterr().out == from_folder  # same bundle id, same checks
    copy = copy_of(bundle, tmp_path)
    expected = tamper_prediction(copy)
    tampered = write_tarball(copy, tmp_path / "tampered.tar")
    with caplog.at_level(logging.ERROR):
        assert verify_hashes(tampered) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith(f"hashes failed: {expected}"), errors
    not_a_tarball = tmp_path / "notes.txt"
    not_a_tarball.write_text("not a tarball\n")
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert verify_hashes(not_a_tarball) == 2  # refused as given
    assert f"{not_a_tarball}: not a bundle tarball that unpacks" in caplog.text


NOT_PLAIN = "member 'bundle/run/escape' is not a plain file or folder (a link or device): a bundle holds none"


def tarball_with(path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    """A tarball of the bundle's manifest under ``bundle/`` and the given extra members."""
    with tarfile.open(path, "w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, b""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("member", "refusal"),
    [
        (
            (tarfile.TarInfo("bundle/../../escape.txt"), b"x"),
            "member 'bundle/../../escape.txt' would be written outside the bundle folder",
        ),
        (
            (tarfile.TarInfo("/escape.txt"), b"x"),
            "not one bundle folder at the top of the tarball (found /, bundle)",
        ),
        (link("bundle/run/escape", "/etc/passwd"), NOT_PLAIN),
        (link("bundle/run/escape", "../../escape.txt", tarfile.LNKTYPE), NOT_PLAIN),
    ],
)
def test_a_tarball_member_outside_the_bundle_folder_or_a_link_is_refused_before_anything_is_written(
    member: tuple[tarfile.TarInfo, bytes],
    refusal: str,
    bundle: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scratch = tmp_path / "scratch"  # where verify unpacks, and where an escaping member would land
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    manifest = tarfile.TarInfo(f"bundle/{MANIFEST}"), (bundle / MANIFEST).read_bytes()
    tarball = tarball_with(tmp_path / "evil.tar", manifest, member)
    with caplog.at_level(logging.ERROR):
        assert verify_hashes(tarball) == 2  # refused as given
    assert f"{tarball}: {refusal}" in caplog.text
    assert list(scratch.iterdir()) == [] and not (tmp_path / "escape.txt").exists()


@pytest.mark.slow
def test_crate_is_a_workflow_run_crate_of_the_bundle(bundle: Path) -> None:
    from rocrate.rocrate import ROCrate

    crate = ROCrate(bundle)
    assert crate.mainEntity.id == "source/Snakefile"
    assert "ComputationalWorkflow" in crate.mainEntity.type
    profiles = {getattr(p, "id", p) for p in crate.root_dataset["conformsTo"]}
    assert {"https://w3id.org/ro/wfrun/process/0.5", "https://w3id.org/ro/wfrun/workflow/0.5"} <= profiles
    (action,) = crate.get_by_type("CreateAction")
    assert action["instrument"].id == "source/Snakefile"
    results = {e.id for e in action["result"]}
    assert f"run/results/{RUN}/verdict.json" in results and f"run/reports/{RUN}/report.html" in results
    manifest = {e.path: e.sha256 for e in read_manifest(bundle).files}
    files = [e for e in crate.data_entities if e.id in manifest and e.id != "source/Snakefile"]
    assert len(files) == len(manifest) - 2  # all but the crate itself and the workflow
    assert all(f["sha256"] == manifest[f.id] for f in files)
    # The rules files the Snakefile includes are parts of the workflow: its helpers and every benchmark's.
    rules = [KIT_ROOT / "rules" / "common.smk"]
    rules += [b.rules_file(KIT_ROOT) for b in benchmarks().values()]
    parts = sorted(f"source/{p.resolve().relative_to(KIT_ROOT).as_posix()}" for p in rules)
    assert sorted(e.id for e in crate.mainEntity["hasPart"]) == parts


def git_blob(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data, usedforsecurity=False).hexdigest()


def hub_cache(root: Path, files: dict[str, bytes], revision: str) -> Path:
    """A Hugging Face cache laid out as huggingface_hub writes it: blobs named by the hub's hash (sha256
    for large-file storage, git blob sha1 otherwise), snapshot files linking to them."""
    repo = root / "hub" / "models--org--m"
    for name, data in files.items():
        blob = hashlib.sha256(data).hexdigest() if name.endswith(".safetensors") else git_blob(data)
        (repo / "blobs").mkdir(parents=True, exist_ok=True)
        (repo / "blobs" / blob).write_bytes(data)
        link = repo / "snapshots" / revision / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(repo / "blobs" / blob, link.parent))
    return root


def test_hub_weights_are_bundled_at_their_pinned_commit_and_checked_against_their_blob_names(
    tmp_path: Path,
) -> None:
    revision = "a" * 40
    cache = hub_cache(tmp_path, {"config.json": b"{}\n", "model.safetensors": b"\0" * 64}, revision)
    found = hub_snapshot(cache, "org/m", {revision}, "m")
    assert [str(rel) for rel, _ in found] == [
        f"hub/models--org--m/snapshots/{revision}/config.json",
        f"hub/models--org--m/snapshots/{revision}/model.safetensors",
    ]
    with pytest.raises(BundleError, match="only weights pinned to one hub commit"):
        hub_snapshot(cache, "org/m", {"unpinned"}, "m")
    with pytest.raises(BundleError, match=f"{'b' * 40}.* missing"):
        hub_snapshot(cache, "org/m", {"b" * 40}, "m")
    blob = (cache / "hub/models--org--m/snapshots" / revision / "model.safetensors").resolve()
    blob.write_bytes(b"\1" * 64)
    with pytest.raises(BundleError, match=r"model.safetensors: its bytes do not match the hub's hash"):
        hub_snapshot(cache, "org/m", {revision}, "m")


@pytest.mark.slow
def test_without_an_engine_the_environment_checks_do_not_run_and_verify_fails(
    bundle: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{bundle}/no-engine.sock")
    assert cli.main(["verify", str(bundle)]) == 1
    out = capsys.readouterr().out
    assert "| hashes | passed |" in out
    assert all(f"| {check} | not run |" in out for check in ("images", "rescore", "report", "rerun"))
    assert "no Docker engine answers" in out and "| Available | yes |" in out and "| Functional | no |" in out


@pytest.mark.slow
def test_rerun_plan_says_why_a_cell_cannot_be_rerun_from_the_bundle(
    run_root: Path, bundle: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    assert archive(run_root, bare) == 0  # no data, no weights
    for folder, expected in (
        (bundle, None),
        (bare, "its weights are not in the bundle (archive with --with-weights)"),
    ):
        manifest = read_manifest(folder)
        ws = open_workspace(folder, manifest, tmp_path / f"scratch-{folder.name}", BUNDLES.recomputed)
        cells = choose(manifest, [], per_model=1, seed=0)
        assert sorted({c.model for c in cells}) == ["random", "tiny-llava"]
        skips = {p.name.split("/")[0]: p.skip for p in plan(ws, load_specs(ws.specs), cells)}
        assert skips == {"random": None, "tiny-llava": expected}
    with pytest.raises(BundleError, match="--rerun random/multi-image/Nope: no archived predictions"):
        choose(read_manifest(bare), ["random/multi-image/Nope"], per_model=1, seed=0)
    with pytest.raises(BundleError, match="not MODEL/MODE/TASK"):
        choose(read_manifest(bare), ["random:ActionSequence"], per_model=1, seed=0)


@pytest.mark.slow
def test_scratch_copy_loses_what_verify_recomputes_and_never_touches_the_bundle(
    bundle: Path, tmp_path: Path
) -> None:
    manifest = read_manifest(bundle)
    ws = open_workspace(bundle, manifest, tmp_path / "scratch", BUNDLES.recomputed)
    out = ws.run_root / ws.out
    assert not (out / "scores").exists() and not (out / "aggregate.json").exists()
    assert (out / "predictions").is_dir() and (out / "downloads").is_dir()
    assert not (ws.run_root / "reports" / RUN).exists()
    assert (ws.render_root / ws.out / "scores").is_dir() and not (
        ws.render_root / ws.out / "downloads"
    ).exists()
    assert list((ws.render_root / "reports" / RUN).rglob("*")) == [
        ws.render_root / "reports" / RUN / "figures"
    ]
    assert verify_hashes(bundle) == 0


@pytest.mark.slow
def test_the_archive_target_packs_a_finished_run(run_root: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(run_root, tmp_path / "run"))  # a dry run writes Snakemake's cache
    planned = snakemake(copy, "-n", "--quiet", "rules", "--cores", "1", "archive", *run_config(copy, RUN))
    assert "archive" in planned and not any(r in planned for r in ("infer", "score", "report "))


def saved_image(folder: Path, layers: list[bytes], compressed: bool = False) -> tuple[Path, str]:
    """An image archive in `docker save`'s format (manifest.json, config, one tar per layer), as an engine
    writes it; returns it and its id, the sha256 of its config."""
    tars = []
    for i, content in enumerate(layers):
        path = folder / f"layer{i}.tar"
        with tarfile.open(path, "w") as tar:
            data = folder / f"file{i}"
            data.write_bytes(content)
            tar.add(data, arcname=f"file{i}")
        tars.append(path.read_bytes())
    diff_ids = [f"sha256:{hashlib.sha256(t).hexdigest()}" for t in tars]
    config = json.dumps(
        {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    )
    image_id = hashlib.sha256(config.encode()).hexdigest()
    names = [f"{hashlib.sha256(t).hexdigest()}/layer.tar" for t in tars]
    manifest = [{"Config": f"{image_id}.json", "RepoTags": None, "Layers": names}]
    archive = folder / "image.tar"
    members = {"manifest.json": json.dumps(manifest).encode(), f"{image_id}.json": config.encode()}
    members |= {n: gzip.compress(t, mtime=0) if compressed else t for n, t in zip(names, tars, strict=True)}
    with tarfile.open(archive, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive, f"sha256:{image_id}"


@pytest.mark.parametrize("compressed", [False, True])
def test_an_image_archive_is_checked_against_its_id_config_and_every_layer(
    tmp_path: Path, compressed: bool
) -> None:
    archive, image_id = saved_image(tmp_path, [b"base\n" * 100, b"kit\n" * 100], compressed)
    assert archive_problems(archive, image_id) == []
    other = "sha256:" + "0" * 64
    assert archive_problems(archive, other) == [
        f"its config {image_id.removeprefix('sha256:')}.json does not hash to the recorded id {other}"
    ]
    with tarfile.open(archive) as tar:
        second = [m for m in tar.getmembers() if m.name.endswith("layer.tar")][1]
    data = bytearray(archive.read_bytes())
    data[second.offset_data + second.size // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    (problem,) = archive_problems(archive, image_id)
    assert problem.startswith(f"layer 2 ({second.name}) does not match the config's sha256:")


def test_a_specs_folder_that_links_its_tasks_folder_is_archived_whole(tmp_path: Path) -> None:
    """A run's specs folder may link its tasks and models from elsewhere: the bundle carries those files."""
    elsewhere = tmp_path / "elsewhere" / "tasks"
    elsewhere.mkdir(parents=True)
    (elsewhere / "T.yaml").write_text("name: T\n")
    specs = tmp_path / "specs"
    (specs / "runs").mkdir(parents=True)
    (specs / "runs" / "r.yaml").write_text("name: r\n")
    (specs / "tasks").symlink_to(elsewhere, target_is_directory=True)
    assert [p.relative_to(specs).as_posix() for p in files_under(specs)] == ["runs/r.yaml", "tasks/T.yaml"]
