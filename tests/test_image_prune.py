"""``milebench image prune``: an image goes only when records that exist and parse prove it stale.

On a real engine, the family images no record names go, the recorded ones, a user's own tags, other
families' and other names' stay. The test's family is its own, so the images other tests build and record
elsewhere are never touched. Without an engine: the decision itself, and the refusals, which come before
the engine is asked."""

from __future__ import annotations

import io
import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path

import docker
import pytest
from docker.errors import ImageNotFound
from test_containers import LOCAL_BASE, engine_or_skip

from milebench import cli
from milebench.containers.image import ImageError, ImageRecord, image_tag, known_families, record_path
from milebench.containers.prune import proven_stale, prune, recorded_images
from milebench.io import atomic_write_json


def labelled(client: docker.DockerClient, tag: str) -> str:
    """A metadata-only image on the local base, distinct by its label; its id."""
    dockerfile = f"FROM {LOCAL_BASE}\nLABEL org.milebench.test={tag}\n".encode()
    image, _ = client.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True)
    return str(image.id)


def present(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except ImageNotFound:
        return False
    return True


def record(folder: Path, family: str, image_id: str, tag: str) -> None:
    fields = {"dockerfile_sha256": "0" * 64, "lock_sha256": "0" * 64, "source_sha256": "0" * 64}
    found = ImageRecord(
        family=family,
        image_id=image_id,
        tag=tag,
        base=LOCAL_BASE,
        base_id=None,
        build_key="0" * 64,
        built_at=datetime.now(UTC),
        build_seconds=0.0,
        **fields,
    )
    atomic_write_json(record_path(family, folder), found.model_dump(mode="json"))


@pytest.mark.docker
def test_prune_removes_only_the_family_images_no_record_names(tmp_path: Path) -> None:
    client = engine_or_skip()
    family, other = f"prunetest{uuid.uuid4().hex[:8]}", f"prunekeep{uuid.uuid4().hex[:8]}"
    old, new, elsewhere = (image_tag(family, key * 64) for key in "abc")
    mine = f"milebench-{family}:mine"  # a user's own tag: not one `image build` gives
    unrecorded = image_tag(other, "d" * 64)  # a family no record names
    ids = {tag: labelled(client, tag) for tag in (old, new, elsewhere, mine, unrecorded)}
    here, there = tmp_path / "records", tmp_path / "other-run" / "records"
    record(here, family, ids[new], new)
    record(there, family, ids[elsewhere], elsewhere)
    families = [family, other]
    try:
        listed, _ = prune(client, recorded_images(families, [here, there]), dry_run=True)
        assert [s.tag for s in listed] == [old]
        assert all(present(client, tag) for tag in ids), "a dry run removes nothing"

        removed, kept = prune(client, recorded_images(families, [here]))
        assert sorted(s.tag for s in removed) == sorted([old, elsewhere]) and kept == []
        assert not present(client, old) and not present(client, elsewhere)
        assert all(present(client, tag) for tag in (new, mine, unrecorded, LOCAL_BASE))
    finally:
        for tag in ids:
            if present(client, tag):
                client.images.remove(tag, force=True)


@pytest.mark.docker
def test_prune_command_dry_run_lists_and_exits_zero(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    engine_or_skip()
    caplog.set_level(logging.INFO)
    assert cli.main(["image", "prune", "--dry-run", "--records", str(tmp_path)]) == 0
    assert any("would remove" in r.getMessage() for r in caplog.records)


def test_prune_refuses_a_records_folder_that_does_not_exist(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """A mistyped folder would keep no image: refused by name before the engine is asked."""
    assert cli.main(["image", "prune", "--records", str(tmp_path / "typo")]) == 2
    assert f"--records {tmp_path / 'typo'}: no such folder" in caplog.text


def test_prune_without_records_refuses_in_a_folder_without_results_images(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from the wrong folder, no record would keep any image: refused, saying why, engine unasked."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert cli.main(["image", "prune"]) == 2
    assert "--records results/images: no such folder, so no record proves any image stale" in caplog.text
    assert "nothing removed" in caplog.text and "no Docker engine" not in caplog.text


@pytest.mark.parametrize("text", ["", '{"family": "kit", "image_id": "sha256:', b"\xff\xfe{}"])
def test_prune_refuses_a_record_that_does_not_parse_and_names_it(
    text: str | bytes, caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A truncated (or empty, or not UTF-8) record would lose its image: the prune is refused by name."""
    family = known_families()[0]
    bad = record_path(family, tmp_path)
    bad.write_bytes(text if isinstance(text, bytes) else text.encode())
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert cli.main(["image", "prune", "--records", str(tmp_path)]) == 2
    assert f"{bad}: not an image record" in caplog.text and "nothing removed" in caplog.text
    with pytest.raises(ImageError, match="not an image record"):
        recorded_images([family], [tmp_path])


def test_only_a_built_tag_of_a_recorded_family_on_an_unrecorded_image_is_proven_stale(tmp_path: Path) -> None:
    current, superseded = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    record(tmp_path, "kit", current, image_tag("kit", "1" * 64))
    recorded = recorded_images(["kit", "api"], [tmp_path])
    assert recorded == {"kit": {current}}
    built = image_tag("kit", "2" * 64)
    assert proven_stale("kit", built, superseded, recorded)
    assert not proven_stale("kit", built, current, recorded), "the recorded image"
    for tag in ("milebench-kit:mine", "milebench-kit:latest", "milebench-kit:" + "2" * 13):
        assert not proven_stale("kit", tag, superseded, recorded), f"{tag} is a user's own tag"
    assert not proven_stale("api", image_tag("api", "2" * 64), superseded, recorded), "no record of api"
