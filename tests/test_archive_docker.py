"""Artifact bundles against a real Docker engine: archive a finished run with its kit image, delete the
run and the image, and verify the bundle offline; then a changed image layer is refused by name.

A small real run (Random on two fixture tasks, whose family is the kit image) goes through Snakemake;
the kit image is built once for the module on the local base ``.ci/docker-setup.sh`` makes. The tiny
models' family (hf-current, CUDA torch) is too large to build here; their re-run goes the same way.
Skips, saying why, without an engine or the base image.
"""

from __future__ import annotations

import json
import logging
import shutil
import tarfile
from pathlib import Path

import docker
import pytest
from test_containers import HOST_CA, LOCAL_BASE, engine_or_skip
from test_declared_files import snakemake, write_run

from milebench import cli
from milebench.archive.badges import Badge
from milebench.archive.manifest import entry, read_manifest, write_manifest
from milebench.containers.image import RECORDS_DIR, ImageRecord, build_image

pytestmark = pytest.mark.docker
RUN = "boxed"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[docker.DockerClient, Path, ImageRecord]:
    client = engine_or_skip()
    root = tmp_path_factory.mktemp("archive-docker")
    config = write_run(root, RUN, ["random"])
    snakemake(root, "--cores", "2", *config)
    ca = HOST_CA if HOST_CA.is_file() else None
    record = build_image("kit", base=LOCAL_BASE, ca_bundle=ca, records=root / RECORDS_DIR, client=client)
    return client, root, record


def flip_a_layer_byte(image_tar: Path) -> None:
    """Change one byte in the middle of the image's largest member (a layer), keeping every size."""
    with tarfile.open(image_tar) as tar:
        layer = max((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.size)
    with open(image_tar, "r+b") as fh:
        fh.seek(layer.offset_data + layer.size // 2)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))


def test_bundle_verifies_offline_without_the_run_or_its_image_and_a_changed_layer_is_refused(
    finished: tuple[docker.DockerClient, Path, ImageRecord],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, root, record = finished
    bundle = tmp_path / "bundle"
    specs = root / "specs"
    argv = ["--specs", str(specs), "archive", "--run", RUN, "--root", str(root), "--out", str(bundle)]
    assert cli.main([*argv, "--with-data"]) == 0
    manifest = read_manifest(bundle)
    (image,) = manifest.images
    assert (image.family, image.image_id) == ("kit", record.image_id)
    # The SBOM was made inside the image: its packages, not the tool's (mounted only to run it).
    sbom = json.loads((bundle / str(image.sbom)).read_text())
    components = {c["name"].lower() for c in sbom["components"]}
    assert {"milebench", "pydantic", "rouge-score"} <= {n.replace("_", "-") for n in components}
    assert "cyclonedx-bom" not in components and "serialNumber" not in sbom

    # Gone from this machine: the run's results and report, the specs folder, the image.
    for folder in ("results", "reports", "specs"):
        shutil.rmtree(root / folder)
    client.images.remove(record.image_id, force=True, noprune=True)
    capsys.readouterr()
    with caplog.at_level(logging.INFO):
        assert cli.main(["verify", str(bundle), "--rerun-per-model", "2"]) == 0
    out = capsys.readouterr().out
    for check in ("hashes", "images", "rescore", "report", "rerun"):
        assert f"| {check} | passed |" in out, out
    for badge in Badge:
        assert f"| {badge} | yes |" in out, out
    assert "random/multi-image/ActionSequence: 2/2 answers identical (deterministic model)" in out
    assert "random/multi-image/TextNeedleInAHaystack: 2/2 answers identical" in out
    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("container: image")]
    assert len(started) == 2 and all("; network none;" in line for line in started)
    assert client.images.get(record.image_id).id == record.image_id  # loaded from the bundle
    assert client.containers.list(all=True, filters={"label": f"org.milebench.verify={RUN}"}) == []

    # A changed layer, with the manifest re-hashed to match it: caught and named before the engine, which
    # holds the layer already and would not read the archive's copy again, is asked to load it.
    archive = bundle / image.file
    flip_a_layer_byte(archive)
    files = tuple(
        entry(bundle, e.path, e.role, e.produced_by) if e.path == image.file else e for e in manifest.files
    )
    write_manifest(bundle, manifest.model_copy(update={"files": files}))
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert cli.main(["verify", str(bundle), "--only", "hashes,images"]) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith(f"images failed: {image.file} (kit): layer "), errors
    assert "does not match the config's sha256:" in errors[0]
    assert "| hashes | passed |" in capsys.readouterr().out
