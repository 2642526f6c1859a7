"""``milebench image prune`` on a real engine: the family images no record names go, the recorded ones,
other families' and other names' stay. The test's family is its own (a ``containers/`` folder in a scratch
root), so the images other tests build and record elsewhere are never touched."""

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
from milebench.containers.image import ImageRecord, record_path
from milebench.containers.prune import prune
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
    root = tmp_path / "kit"
    for name in (family, other):
        (root / "containers" / name).mkdir(parents=True)
        for file in ("Dockerfile", "requirements.lock"):
            (root / "containers" / name / file).write_text("")
    old, new, elsewhere = (f"milebench-{family}:{key}" for key in ("old", "new", "elsewhere"))
    unrelated = f"milebench-{other}x:1"  # not a family under containers/
    ids = {tag: labelled(client, tag) for tag in (old, new, elsewhere, unrelated)}
    here, there = tmp_path / "records", tmp_path / "other-run" / "records"
    record(here, family, ids[new], new)
    record(there, family, ids[elsewhere], elsewhere)
    try:
        listed, _ = prune(client, records=[here, there], root=root, dry_run=True)
        assert [s.tag for s in listed] == [old]
        assert all(present(client, tag) for tag in ids), "a dry run removes nothing"

        removed, kept = prune(client, records=[here], root=root)
        assert sorted(s.tag for s in removed) == sorted([old, elsewhere]) and kept == []
        assert not present(client, old) and not present(client, elsewhere)
        assert present(client, new) and present(client, unrelated) and present(client, LOCAL_BASE)
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
