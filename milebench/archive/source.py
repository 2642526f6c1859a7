"""The kit's own source at each commit the run's jobs ran at, and its workflow, from the git checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

from milebench.archive.manifest import BundleError
from milebench.provenance import KIT_ROOT

SOURCE = "source"
WORKFLOW = f"{SOURCE}/Snakefile"
RULES_SUFFIX = ".smk"
"""The Snakefile includes rules files (its own helpers, and the rules file each benchmark package ships):
every file of the tree with this suffix is part of the workflow."""


def is_workflow(path: str) -> bool:
    """The main workflow file or one of the rules files it includes."""
    return path == WORKFLOW or (path.startswith(f"{SOURCE}/") and path.endswith(RULES_SUFFIX))


def git(*args: str) -> bytes:
    """Output of a git command in the kit's checkout; its failure names the command."""
    try:
        done = subprocess.run(["git", "-C", str(KIT_ROOT), *args], capture_output=True, check=False)
    except OSError as err:
        raise BundleError(f"git {' '.join(args)}: {err}") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BundleError(
            f"git {' '.join(args)} in {KIT_ROOT}: {reason[-1] if reason else 'failed'}: the kit's source at "
            "the run's commit is needed (archive from a checkout that has it)"
        )
    return done.stdout


def write_source(commits: tuple[str, ...], bundle: Path) -> list[tuple[str, str]]:
    """``source/<commit>.tar`` per commit (``git archive``: the same bytes every time) and the workflow
    of the latest one (its Snakefile and rules files); returns (bundle path, how it was made)."""
    folder = bundle / SOURCE
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for commit in commits:
        (folder / f"{commit}.tar").write_bytes(git("archive", "--format=tar", commit))
        written.append((f"{SOURCE}/{commit}.tar", f"git archive --format=tar {commit}"))
    latest = max(commits, key=lambda c: int(git("show", "-s", "--format=%ct", c).strip() or b"0"))
    tree = git("ls-tree", "-r", "--name-only", latest).decode().splitlines()
    rules = [name for name in tree if name.endswith(RULES_SUFFIX)]
    for name in ["Snakefile", *rules]:
        (bundle / SOURCE / name).parent.mkdir(parents=True, exist_ok=True)
        (bundle / SOURCE / name).write_bytes(git("show", f"{latest}:{name}"))
        written.append((f"{SOURCE}/{name}", f"git show {latest}:{name}"))
    return written
