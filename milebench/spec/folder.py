"""The one loader of a specs folder, every benchmark's: each ``*.yaml`` file of a kind's folder
(``tasks/``, ``models/``, ``runs/``) validated by that kind's model and named by its file.

The default folder is the one the package ships (``specs/`` at the top of the tree, installed as
``milebench.specs``); ``--specs`` names another. A folder with its own ``paper.yaml`` is whole, as the
shipped one; one without is an overlay of the shipped folder: its spec files are added to the shipped
ones (a file of the same name replaces the shipped file), and every other file (the paper spec, the
locks) is its own where it has one, else the shipped one. A user keeps their models and runs in their
own folder and the kit's tasks and paper."""

from __future__ import annotations

from pathlib import Path

from milebench.package_data import package_path
from milebench.spec.base import S, SpecError, load_spec

DEFAULT_SPECS = package_path("milebench.specs")
PAPER = "paper.yaml"


def overlay_base(root: Path) -> Path | None:
    """The shipped folder ``root`` overlays, or None when it is whole (it has its own paper spec)."""
    root = Path(root)
    if (root / PAPER).exists() or root.resolve() == DEFAULT_SPECS.resolve():
        return None
    return DEFAULT_SPECS


def resolve_file(root: Path, base: Path | None, relative: str | Path) -> Path:
    own = Path(root) / relative
    return own if base is None or own.exists() else base / relative


def spec_files_of(folder: Path, base_folder: Path | None) -> list[Path]:
    """The ``*.yaml`` files of a spec folder, over those of the folder it overlays, by file name."""
    found = {p.name: p for p in sorted(base_folder.glob("*.yaml"))} if base_folder is not None else {}
    found.update({p.name: p for p in sorted(Path(folder).glob("*.yaml"))})
    return [found[name] for name in sorted(found)]


def load_kind(root: Path, part: str, model: type[S], base: Path | None) -> dict[str, tuple[Path, S]]:
    """Every spec of the kind folder ``root/part`` (over ``base/part``) by name, with its file; a name
    that is not its file's, or a folder without a spec, is a SpecError naming it."""
    folder = root / part
    loaded: dict[str, tuple[Path, S]] = {}
    for path in spec_files_of(folder, None if base is None else base / part):
        spec = load_spec(path, model)
        name = spec.name  # type: ignore[attr-defined]
        if name != path.stem:
            raise SpecError(path, [("name", f"{name!r} must equal the file name {path.stem!r}")])
        loaded[name] = (path, spec)
    if not loaded:
        raise SpecError(folder, [("<folder>", "no *.yaml spec files")])
    return loaded
