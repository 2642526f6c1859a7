"""Artifact bundles against a real Docker engine: archive a reduced smoke run (Random and tiny LLaVA, every
job in a container) with its tiny model's weights, delete the run's results and both family images, and
verify the bundle offline: every check and badge passes and the re-run answers are identical; then a
changed image layer is refused by name.

The run is the session's ``boxed_run`` (conftest): the kit image and a CPU-torch build of hf-current, built
once and shared with the other Docker tests. Skips, saying why, without an engine or the base image.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from docker_runs import BOXED_RUN, BoxedRun
from test_containers import engine_or_skip

from milebench import cli
from milebench.archive.badges import Badge, Role
from milebench.archive.manifest import entry, write_manifest
from milebench.archive.reader import read_manifest
from milebench.containers.image import local_image_id, read_record, record_path

pytestmark = pytest.mark.docker
CELL = "multi-image/ActionSequence"


def flip_a_layer_byte(image_tar: Path) -> None:
    """Change one byte in the middle of the image's largest member (a layer), keeping every size."""
    with tarfile.open(image_tar) as tar:
        layer = max((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.size)
    with open(image_tar, "r+b") as fh:
        fh.seek(layer.offset_data + layer.size // 2)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))


def sbom_packages(bundle: Path, sbom: str | None) -> set[str]:
    components = json.loads((bundle / str(sbom)).read_text())["components"]
    return {c["name"].lower().replace("_", "-") for c in components}


def test_smoke_run_bundle_verifies_offline_without_its_results_or_images_and_a_changed_layer_is_refused(
    boxed_run: BoxedRun,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = engine_or_skip()
    root = tmp_path / "run"  # a copy: the session's run stays for the other tests
    for folder in ("results", "reports", "specs"):  # the specs' links to the kit's folders made real
        shutil.copytree(boxed_run.root / folder, root / folder)
    bundle = tmp_path / "bundle"
    archive = [sys.executable, "-m", "milebench", "--specs", str(root / "specs"), "archive"]
    archive += ["--run", BOXED_RUN, "--root", str(root), "--out", str(bundle)]
    archive += ["--with-data", "--with-weights"]
    done = subprocess.run(archive, cwd=root, env=boxed_run.env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = read_manifest(bundle)
    records = {f: read_record(record_path(f, boxed_run.records)) for f in ("hf-current", "kit")}
    assert {i.family: i.image_id for i in manifest.images} == {
        f: r.image_id for f, r in records.items() if r is not None
    }
    weights = [e.path for e in manifest.files if e.role is Role.WEIGHTS]
    assert weights and all("/models/tiny-llava/" in p for p in weights)
    # Each SBOM was made inside its image: its packages, not the tool's (mounted only to run it).
    sboms = {i.family: sbom_packages(bundle, i.sbom) for i in manifest.images}
    assert {"milebench", "pydantic", "rouge-score"} <= sboms["kit"] and "torch" not in sboms["kit"]
    assert {"milebench", "torch", "transformers"} <= sboms["hf-current"]
    assert not any("cyclonedx-bom" in packages for packages in sboms.values())

    # Gone from this machine: the run's results, report and specs, and both family images.
    shutil.rmtree(root)
    for image in manifest.images:
        client.images.remove(image.image_id, force=True, noprune=True)
        assert local_image_id(client, image.image_id) is None
    capsys.readouterr()
    with caplog.at_level(logging.INFO):
        assert cli.main(["verify", str(bundle)]) == 0
    out = capsys.readouterr().out
    for check in ("hashes", "images", "rescore", "report", "rerun"):
        assert f"| {check} | passed |" in out, out
    for badge in Badge:
        assert f"| {badge} | yes |" in out, out
    for model in ("random", "tiny-llava"):
        assert f"{model}/{CELL}: 2/2 answers identical (deterministic model)" in out, out
    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("container: image")]
    assert len(started) == 3 and all("; network none;" in line for line in started), started
    for image in manifest.images:  # loaded from the bundle
        assert local_image_id(client, image.image_id) == image.image_id
    assert client.containers.list(all=True, filters={"label": f"org.milebench.verify={BOXED_RUN}"}) == []

    # A changed layer, with the manifest re-hashed to match it: caught and named before the engine, which
    # holds the layer already and would not read the archive's copy again, is asked to load it.
    kit = next(i for i in manifest.images if i.family == "kit")
    flip_a_layer_byte(bundle / kit.file)
    files = tuple(
        entry(bundle, e.path, e.role, e.produced_by) if e.path == kit.file else e for e in manifest.files
    )
    write_manifest(bundle, manifest.model_copy(update={"files": files}))
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert cli.main(["verify", str(bundle), "--only", "hashes,images"]) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith(f"images failed: {kit.file} (kit): layer "), errors
    assert "does not match the config's sha256:" in errors[0]
    assert "| hashes | passed |" in capsys.readouterr().out
