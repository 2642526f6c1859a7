"""``milebench verify`` on bundles an attacker made: a real small bundle (the session's ``audited_bundle``),
tampered and its manifest rewritten to match (so the hash check alone would pass), beside a victim folder.
Every attack ends in one error naming the field or file (exit 2 for a bundle refused as given), no
Available badge, and the victim's bytes untouched and undescribed: no write, removal or read outside the
bundle and its scratch copy."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_archive import copy_of

from milebench import cli
from milebench.archive.compare import compare_json, compare_rows
from milebench.archive.manifest import (
    MANIFEST,
    MAX_FILES,
    MAX_MANIFEST_BYTES,
    BundleError,
)
from milebench.archive.manifest import Manifest as BundleManifest
from milebench.archive.reader import read_manifest
from milebench.archive.workspace import open_workspace
from milebench.benchmarks.milebench.archive.hooks import BUNDLES
from milebench.io import sha256_file

ManifestJson = dict[str, Any]
Attack = Callable[[Path, Path, ManifestJson], str]
"""(bundle, victim folder, manifest JSON to edit in place) -> the error it must end in."""
Hostile = Callable[[BundleManifest, Path], BundleManifest]


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A folder like a run's results beside the bundle: what an escape would remove or read."""
    folder = tmp_path / "victim"
    (folder / "scores").mkdir(parents=True)
    (folder / "scores" / "task.json").write_text('{"score": 1}\n')
    (folder / "aggregate.json").write_text('{"mean": 1}\n')
    (folder / "secret.txt").write_text("the victim's own bytes\n")
    return folder


def tree(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` with its sha256 (or "folder"): equal before and after, nothing changed."""
    return {
        p.relative_to(folder).as_posix(): sha256_file(p) if p.is_file() else "folder"
        for p in folder.rglob("*")
    }


def listed(file: Path, path: str, sha256: str | None = None) -> dict[str, Any]:
    """A manifest entry for ``file`` under ``path``, with its true size (and sha256, unless given)."""
    return {
        "path": path,
        "sha256": sha256 or sha256_file(file),
        "size": file.stat().st_size,
        "role": "log",
        "produced_by": "snakemake rule x",
        "backs": ["Available"],
    }


def of_role(manifest: ManifestJson, role: str) -> dict[str, Any]:
    return next(e for e in manifest["files"] if e["role"] == role)


PAD = "(spaces after the JSON)"
"""A manifest key an attack sets to append that many spaces to the manifest's text (still valid JSON)."""


@dataclass(frozen=True)
class Verified:
    bundle: Path
    code: int
    expected: str
    errors: list[str]
    output: list[str]
    """What verify printed and the summary it wrote (empty when refused)."""


Attacked = Callable[[Attack], Verified]


@pytest.fixture
def attacked(
    audited_bundle: Path,
    victim: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> Attacked:
    """Verify the hashes of a copy of the bundle after an attack, its manifest rewritten to match."""

    def verify(attack: Attack) -> Verified:
        bundle, summary = copy_of(audited_bundle, tmp_path), tmp_path / "summary.md"
        path = bundle / MANIFEST
        manifest = json.loads(path.read_text())
        expected = attack(bundle, victim, manifest)
        padding = " " * manifest.pop(PAD, 0)
        path.write_text(json.dumps(manifest, indent=1) + "\n" + padding)
        with caplog.at_level(logging.ERROR):
            code = cli.main(["verify", str(bundle), "--only", "hashes", "--summary", str(summary)])
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        written = summary.read_text() if summary.exists() else ""
        return Verified(bundle, code, expected, errors, [capsys.readouterr().out, written])

    return verify


def run_climbs_out(bundle: Path, victim: Path, manifest: ManifestJson) -> str:
    manifest["run"] = f"../../../../{victim.name}"
    return "run: String should match pattern"


def aggregate_climbs_out(bundle: Path, victim: Path, manifest: ManifestJson) -> str:
    entry = of_role(manifest, "aggregate")
    entry.update(
        listed(victim / "aggregate.json", f"run/../../{victim.name}/aggregate.json"), role="aggregate"
    )
    return f"'run/../../{victim.name}/aggregate.json' is not a path inside the bundle: climbs out with '..'"


def cell_is_no_cell(bundle: Path, victim: Path, manifest: ManifestJson) -> str:
    entry = of_role(manifest, "prediction")
    moved = entry["path"].replace("/multi-image/", "/no-mode/")
    (bundle / moved).parent.mkdir(parents=True)
    (bundle / entry["path"]).rename(bundle / moved)
    entry["path"] = moved
    return f"{moved!r} is not a predictions file"


def image_file_climbs_out(bundle: Path, victim: Path, manifest: ManifestJson) -> str:
    image = {"family": "kit", "image_id": "sha256:" + "0" * 64, "sbom": None}
    manifest["images"] = [{**image, "file": f"../{victim.name}/secret.txt"}]
    return f"images.0.file: Value error, '../{victim.name}/secret.txt' is not a path inside the bundle"


@pytest.mark.slow
@pytest.mark.parametrize(
    "attack", [run_climbs_out, aggregate_climbs_out, cell_is_no_cell, image_file_climbs_out]
)
def test_a_name_or_path_of_the_manifest_that_is_not_one_is_refused_by_name(
    attack: Attack, attacked: Attacked, victim: Path
) -> None:
    before = tree(victim)
    found = attacked(attack)
    assert found.code == 2 and len(found.errors) == 1, found.errors
    (error,) = found.errors
    assert error.startswith(f"{found.bundle / MANIFEST}: not a bundle manifest: ") and found.expected in error
    assert "Artifact evaluation" not in "".join(found.output) and tree(victim) == before


def hostile_run(manifest: BundleManifest, victim: Path) -> BundleManifest:
    return manifest.model_copy(update={"run": f"../../../{victim.name}"})


def hostile_aggregate(manifest: BundleManifest, victim: Path) -> BundleManifest:
    path = f"run/../../{victim.name}/aggregate.json"
    files = tuple(e.model_copy(update={"path": path}) if e.role == "aggregate" else e for e in manifest.files)
    return manifest.model_copy(update={"files": files})


@pytest.mark.slow
@pytest.mark.parametrize("hostile", [hostile_run, hostile_aggregate])
def test_the_scratch_copy_writes_and_removes_nothing_outside_its_folder(
    hostile: Hostile, audited_bundle: Path, victim: Path, tmp_path: Path
) -> None:
    """The workspace's own guard, under the manifest's: given names that climb out (a manifest copied
    without validation), it refuses before touching anything outside the scratch folder."""
    before = tree(victim)
    manifest = hostile(read_manifest(audited_bundle), victim)
    with pytest.raises(BundleError, match="resolves outside this folder: neither read nor written"):
        open_workspace(audited_bundle, manifest, tmp_path / "scratch", BUNDLES.recomputed)
    assert tree(victim) == before


def entry_climbs_out(bundle: Path, victim: Path, manifest: ManifestJson) -> str:
    manifest["files"].append(listed(victim / "secret.txt", f"../{victim.name}/secret.txt"))
    return f"'../{victim.name}/secret.txt' is not a path inside the bundle: climbs out with '..'"


def entry_is_absolute(bundle: Path, victim: Path, manifest: ManifestJson) -> str:
    secret = victim / "secret.txt"
    manifest["files"].append(listed(secret, str(secret), sha256="0" * 64))
    return f"{str(secret)!r} is not a path inside the bundle: an absolute path"


def entry_under_a_link(bundle: Path, victim: Path, manifest: ManifestJson) -> str:
    (bundle / "run" / "leak").symlink_to(victim)
    manifest["files"].append(listed(victim / "secret.txt", "run/leak/secret.txt", sha256="0" * 64))
    return "hashes failed: run/leak/secret.txt: a link or under one: not read (a bundle holds no links)"


@pytest.mark.slow
@pytest.mark.parametrize("attack", [entry_climbs_out, entry_is_absolute, entry_under_a_link])
def test_a_file_outside_the_bundle_is_never_read_described_or_badged(
    attack: Attack, attacked: Attacked, victim: Path
) -> None:
    before = tree(victim)
    found = attacked(attack)
    code = 1 if found.expected.startswith("hashes failed") else 2  # failed, not refused: no check read it
    assert found.code == code and any(found.expected in e for e in found.errors), found.errors
    secret = sha256_file(victim / "secret.txt")
    for text in (*found.output, *found.errors):
        assert secret[:12] not in text and "| Available | yes |" not in text
    assert tree(victim) == before


def claims_64_gib(bundle: Path, victim: Path, manifest: ManifestJson) -> str:
    entry = of_role(manifest, "aggregate")
    entry["size"] = 64 << 30
    return f"{entry['path']} claims {64 << 30} bytes, over the"


def lists_too_many_files(bundle: Path, victim: Path, manifest: ManifestJson) -> str:
    entry = of_role(manifest, "aggregate")
    manifest["files"] += [{**entry, "path": f"run/pad/{i}"} for i in range(MAX_FILES)]
    return f"files: Tuple should have at most {MAX_FILES} items"


def is_too_long(bundle: Path, victim: Path, manifest: ManifestJson) -> str:
    manifest[PAD] = MAX_MANIFEST_BYTES
    return f"over the limit of {MAX_MANIFEST_BYTES} bytes of a bundle manifest"


@pytest.mark.slow
@pytest.mark.parametrize("attack", [claims_64_gib, lists_too_many_files, is_too_long])
def test_what_a_manifest_may_claim_is_bounded_before_any_file_is_read(
    attack: Attack, attacked: Attacked
) -> None:
    found = attacked(attack)
    assert found.code == 2 and len(found.errors) == 1 and found.expected in found.errors[0], found.errors[:3]
    assert "Artifact evaluation" not in "".join(found.output)


@pytest.mark.parametrize(
    ("text", "why"),
    [(b"\xff\xfe", "not UTF-8 text"), (b"{", "not JSON"), (b"[" * 200_000, "not JSON: nested too deep")],
)
def test_an_archived_result_that_does_not_parse_is_named_not_a_traceback(
    text: bytes, why: str, tmp_path: Path
) -> None:
    """The archived side of every comparison is the author's bytes (they pass the hash check as written)."""
    archived, redone = tmp_path / "aggregate.json", tmp_path / "redone.json"
    archived.write_bytes(text)
    redone.write_text("{}\n")
    with pytest.raises(BundleError, match=f"{archived}: {why}"):
        compare_json("aggregate.json", archived, redone)
    rows = tmp_path / "judgments.jsonl"
    rows.write_text('{"sample_id": 1}\n[1, 2]\n')
    with pytest.raises(BundleError, match=f"{rows}: a line is not a JSON object"):
        compare_rows("judgments.jsonl", rows, rows, ("sample_id",))


@pytest.mark.parametrize("given", ["empty folder", "a file"])
def test_what_is_not_a_bundle_is_refused_as_given(
    given: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "given"
    target.mkdir() if given == "empty folder" else target.write_text("not a bundle\n")
    with caplog.at_level(logging.ERROR):
        assert cli.main(["verify", str(target)]) == 2
    expected = f"{target / MANIFEST}: missing" if given == "empty folder" else f"{target}: not a bundle"
    assert expected in caplog.text, caplog.text
