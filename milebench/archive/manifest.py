"""The bundle's manifest: sha256 and size of every file, what produced it and which badges it backs.

``MANIFEST.json`` lists every file of the bundle but itself; its own sha256 is the bundle's id, so a
bundle is content-addressed: two bundles with the same id hold the same bytes.

A bundle comes from another machine, so its manifest is hostile input. It is bounded before it is parsed
(its length, then its file count), every name in it must be a name (the benchmark, the run, and what the
run's benchmark reads names from, such as MileBench's cells: its hooks check those) and every path a
relative path inside the bundle, so nothing built from it can climb out; a path is also resolved (links
followed) inside the bundle before the file behind it is read.
"""

from __future__ import annotations

import json
import stat
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, model_validator

from milebench.archive.badges import BACKS, Badge, Role
from milebench.errors import KitError
from milebench.io import atomic_write_text, destination, sha256_file
from milebench.spec.base import Spec, describe_errors
from milebench.spec.weights_lock import Commit

MANIFEST = "MANIFEST.json"
FORMAT: Literal["milebench-bundle/2"] = "milebench-bundle/2"
FIRST_FORMAT = "milebench-bundle/1"
"""MileBench's bundles before any other benchmark had them: no ``benchmark`` field; still read."""
FIRST_FORMAT_BENCHMARK = "milebench"
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
RUN_ROOT = "run"
"""The run's own layout (results/<run>/, reports/<run>/) in a bundle."""
SPECS = "specs"
"""The specs folder the run was given, in a bundle."""
WEIGHTS = "weights"
"""The Hugging Face home of hub weights in a bundle (mounted at /models in the images)."""
SNAKEMAKE_MARKER = ".snakemake_timestamp"
"""What Snakemake writes into a folder it made (the ``archive`` target's bundle): empty, never read."""
MAX_MANIFEST_BYTES = 64 << 20
"""The longest manifest read: room for well over ``MAX_FILES`` entries of about 300 bytes each."""
MAX_FILES = 100_000
"""The most files a manifest may list: every cell of the kit's models, tasks and modes (about 2,300) with
its prediction, journal, judgment, score, job records and logs is a few tens of thousands."""
MAX_PATH_CHARS = 1024
SHA256 = r"^[0-9a-f]{64}$"


class BundleError(KitError, RuntimeError):
    """A run that cannot be archived, or a bundle that cannot be read; the message says which file."""


class RefusedBundle(BundleError):
    """A bundle refused as given (a manifest out of bounds, a name or path that is not one, a path that
    resolves outside): nothing of it is used, as with a bad spec."""

    exit_status = 2


def path_problem(text: str) -> str | None:
    """Why ``text`` is not a relative POSIX path inside the bundle; None when it is one."""
    path = PurePosixPath(text)
    if not text or "\0" in text or len(text) > MAX_PATH_CHARS:
        return f"empty, over {MAX_PATH_CHARS} characters or with a NUL byte"
    if path.is_absolute():
        return "an absolute path"
    if ".." in path.parts:
        return "climbs out with '..'"
    if path.as_posix() != text or "." in path.parts:
        return "not a normal path (empty, '.' or trailing parts)"
    return None


def bundle_path(text: str) -> str:
    if (why := path_problem(text)) is not None:
        raise ValueError(f"{text!r} is not a path inside the bundle: {why}")
    return text


BundlePath = Annotated[str, AfterValidator(bundle_path)]


class Entry(Spec):
    path: BundlePath = Field(description="POSIX path inside the bundle.")
    sha256: str = Field(pattern=SHA256)
    size: int = Field(ge=0)
    role: Role
    produced_by: str = Field(description="The command or step that wrote the file.")
    backs: tuple[Badge, ...] = Field(description="The badges whose claims this file is evidence for.")


class ImageEntry(Spec):
    family: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", description="A folder name under containers/.")
    image_id: str = Field(
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="The engine's id (sha256 of the image config) the run recorded.",
    )
    file: BundlePath = Field(description="The `docker save` archive in the bundle.")
    sbom: BundlePath | None = Field(description="The image's CycloneDX SBOM in the bundle.")


class Manifest(Spec):
    format: Literal["milebench-bundle/2", "milebench-bundle/1"] = FORMAT
    benchmark: str = Field(
        pattern=NAME, description="The benchmark whose run this is: it reads the run's own files."
    )
    run: str = Field(pattern=NAME, description="The run's name (a name, never a path).")
    specs: BundlePath = Field(description="The specs folder the run used, inside the bundle.")
    root: BundlePath = Field(
        description="The run's layout (results/<run>/, reports/<run>/) inside the bundle."
    )
    kit_commits: tuple[Commit, ...] = Field(
        min_length=1, description="Every kit commit the run's jobs ran at."
    )
    dirty: bool = Field(description="Some job ran from a checkout with uncommitted changes.")
    images: tuple[ImageEntry, ...]
    with_data: bool
    with_weights: bool
    files: tuple[Entry, ...] = Field(max_length=MAX_FILES)

    @model_validator(mode="before")
    @classmethod
    def _first_format(cls, data: Any) -> Any:
        """A format 1 manifest is MileBench's: it has no ``benchmark`` field and may not name one."""
        if isinstance(data, dict) and data.get("format") == FIRST_FORMAT:
            if "benchmark" in data:
                raise ValueError(f"benchmark: not a field of format {FIRST_FORMAT} (MileBench's bundles)")
            return {**data, "benchmark": FIRST_FORMAT_BENCHMARK}
        return data

    @model_validator(mode="after")
    def _named_once(self) -> Manifest:
        twice = [p for p, n in Counter(e.path for e in self.files).items() if n > 1]
        if twice:
            raise ValueError(f"{twice[0]!r} is listed more than once")
        return self

    def payload(self) -> dict[str, Any]:
        """The manifest as written: a format 1 one as it was (no ``benchmark``), so it keeps its id."""
        data = self.model_dump(mode="json")
        if self.format == FIRST_FORMAT:
            del data["benchmark"]
        return data


def entry(bundle: Path, path: str, role: Role, produced_by: str) -> Entry:
    """The manifest line of one file already in the bundle."""
    target = bundle / path
    return Entry(
        path=path,
        sha256=sha256_file(target),
        size=target.stat().st_size,
        role=role,
        produced_by=produced_by,
        backs=BACKS[role],
    )


def write_manifest(bundle: Path, manifest: Manifest) -> str:
    """Write ``MANIFEST.json`` (files sorted by path) and return the bundle's id."""
    ordered = manifest.model_copy(update={"files": tuple(sorted(manifest.files, key=lambda e: e.path))})
    atomic_write_text(bundle / MANIFEST, json.dumps(ordered.payload(), indent=1) + "\n")
    return bundle_id(bundle)


def bundle_id(bundle: Path) -> str:
    return sha256_file(bundle / MANIFEST)


def parse_manifest(bundle: Path) -> Manifest:
    """The manifest, bounded before it is read and validated as a whole; a BundleError says why not."""
    path = bundle / MANIFEST
    if not bundle.is_dir():
        raise RefusedBundle(f"{bundle}: not a bundle folder")
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):
            raise RefusedBundle(f"{path}: not a regular file (a link, folder or device): a bundle's is one")
        if info.st_size > MAX_MANIFEST_BYTES:
            raise RefusedBundle(
                f"{path}: {info.st_size} bytes, over the limit of {MAX_MANIFEST_BYTES} bytes of a bundle "
                "manifest"
            )
        return Manifest.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise RefusedBundle(f"{path}: missing: not a bundle made by `milebench archive`") from None
    except ValidationError as err:
        raise RefusedBundle(f"{path}: not a bundle manifest: {describe_errors(err)}") from None


def inside(folder: Path, path: str) -> Path:
    """``folder / path`` with its links resolved (the bundle, the scratch copy); a BundleError when that
    lies outside ``folder``, before anything there is read or written."""
    found = destination(folder.resolve(), path)
    if found is None:
        raise RefusedBundle(f"{folder}: {path}: resolves outside this folder: neither read nor written")
    return found


def held_bytes(bundle: Path) -> int:
    """The bytes of every regular file under the bundle folder, links not followed (nothing is read)."""
    return sum(p.lstat().st_size for p in bundle.rglob("*") if stat.S_ISREG(p.lstat().st_mode))


def check_claims(bundle: Path, manifest: Manifest) -> None:
    """Refuse, before any file is read, an entry claiming more bytes than the whole bundle folder holds."""
    held = held_bytes(bundle)
    over = next((e for e in manifest.files if e.size > held), None)
    if over is not None:
        raise RefusedBundle(
            f"{bundle / MANIFEST}: {over.path} claims {over.size} bytes, over the {held} bytes the bundle "
            "folder holds in all"
        )


def bundle_files(bundle: Path) -> set[str]:
    """Every regular file under the bundle but the manifest and Snakemake's marker, as POSIX paths."""
    return {
        p.relative_to(bundle).as_posix()
        for p in bundle.rglob("*")
        if (p.is_file() or p.is_symlink())
        and p.relative_to(bundle).as_posix() not in (MANIFEST, SNAKEMAKE_MARKER)
    }


def check_files(bundle: Path, manifest: Manifest) -> list[str]:
    """One line per file that is missing, altered (size or sha256) or not in the manifest."""
    problems, root = [], bundle.resolve()
    for e in manifest.files:
        path = bundle / e.path
        if destination(root, e.path) != root / e.path:
            problems.append(f"{e.path}: a link or under one: not read (a bundle holds no links)")
            continue
        if not path.is_file():
            problems.append(f"{e.path}: missing ({e.role}, {e.size} bytes in the manifest)")
            continue
        size = path.stat().st_size
        digest = sha256_file(path) if size == e.size else None
        if digest != e.sha256:
            found = f"sha256 {digest[:12]}" if digest else f"{size} bytes"
            problems.append(
                f"{e.path}: altered ({e.role}; manifest: sha256 {e.sha256[:12]}, {e.size} bytes; "
                f"bundle: {found})"
            )
    listed = {e.path for e in manifest.files}
    problems += [f"{p}: not in the manifest" for p in sorted(bundle_files(bundle) - listed)]
    return problems
