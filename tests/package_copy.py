"""A copy of the installed package with modules added, run in a fresh interpreter: tests that adding a
module is all it takes (no list elsewhere needs editing)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import milebench

PACKAGE = Path(milebench.__file__).parent


def package_with(tmp_path: Path, modules: dict[str, str]) -> Path:
    """A copy of the package under ``tmp_path/site`` with ``modules`` (paths under it -> source) added;
    returns the folder to put on PYTHONPATH."""
    root = tmp_path / "site"
    shutil.copytree(PACKAGE, root / "milebench", ignore=shutil.ignore_patterns("__pycache__"))
    for module, text in modules.items():
        (root / "milebench" / module).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def run_with(root: Path, argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python argv`` with only the copy at ``root`` importable as ``milebench``."""
    return subprocess.run(
        [sys.executable, *argv],
        env={"PYTHONPATH": str(root), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
        cwd=cwd or root,
        capture_output=True,
        text=True,
        timeout=300,
    )
