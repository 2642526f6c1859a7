"""A non-editable install works outside the checkout: a wheel of the package, installed into a fresh
virtualenv, validates its own specs and renders the report of an existing run from another folder.

The wheel is built offline from a copy of the kit's installable source; the virtualenv sees the
dependencies of the environment running the tests, never the checkout (no PYTHONPATH, another folder).
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.score.aggregate import summarise
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.containers.image import REPO_ROOT, SKIP, copy_kit_source
from milebench.io import atomic_write_json, atomic_write_jsonl
from milebench.spec.folder import DEFAULT_SPECS

pytestmark = pytest.mark.install

MODE = Mode.MULTI_IMAGE
SCORES = {"random": (1.0, 0.0, 0.0), "tiny-llava": (0.0, 0.0, 0.0), "tiny-qwen2-vl": (1.0, 1.0, 1.0)}
"""Each smoke model's judgment of the three samples of every task: 33.3, 0.0 and 100.0 everywhere."""


def run(*command: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def build_wheel(tmp_path: Path, env: dict[str, str]) -> Path:
    """``pip wheel`` of a copy of the installable source, offline, with the build backend at hand."""
    (tmp_path / "source").mkdir()
    source = copy_kit_source(REPO_ROOT, tmp_path / "source")
    (tmp_path / "wheels").mkdir()
    pip_wheel = ["-m", "pip", "wheel", source, "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    built = run(sys.executable, *pip_wheel, "-w", tmp_path / "wheels", cwd=tmp_path, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "wheels").glob("milebench-*.whl")
    return wheel


def fresh_venv(folder: Path, wheel: Path, env: dict[str, str]) -> Path:
    """A virtualenv with the wheel installed; its dependencies come from the running environment (the
    base interpreter's through --system-site-packages, and this one's too when it is itself a venv)."""
    venv = ["-m", "venv", "--system-site-packages", "--without-pip", folder]
    made = run(sys.executable, *venv, cwd=folder.parent, env=env)
    assert made.returncode == 0, made.stderr
    python = folder / "bin" / "python"
    if sys.prefix != sys.base_prefix:
        own_site = run(
            python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=folder, env=env
        )
        Path(own_site.stdout.strip(), "running-environment.pth").write_text("\n".join(site.getsitepackages()))
    pip_install = ["-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel]
    installed = run(sys.executable, *pip_install, cwd=folder.parent, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return folder / "bin"


def write_smoke_scores(work: Path) -> None:
    """The shipped smoke run's judgments and task scores, as its score jobs leave them, under ``work``."""
    specs = load_specs(DEFAULT_SPECS)
    run_spec = specs.run("smoke")
    paths = RunPaths.for_run(run_spec, base=work)
    for model in run_spec.models:
        for task in specs.run_tasks(run_spec):
            judged = {
                scorer: [Judgment(task=task.name, mode=MODE, model=model, sample_id=i, scorer=scorer,
                                  status="scored", score=value, image_quantity_level="Few")
                         for i, value in enumerate(SCORES[model])]
                for scorer in ("paper", "standard")
            }  # fmt: skip
            rows = [j.model_dump(mode="json") for js in judged.values() for j in js]
            atomic_write_jsonl(paths.judgments(model, task.name, MODE), rows)
            score = summarise(
                task.name, model, MODE, "paper", judged["paper"], {"standard": judged["standard"]}
            )
            atomic_write_json(paths.task_score(model, task.name, MODE), score.model_dump(mode="json"))


def test_installed_wheel_checks_its_specs_and_renders_an_existing_run(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    wheel = build_wheel(tmp_path, env)
    shipped = {
        p.relative_to(REPO_ROOT).as_posix()
        for p in (REPO_ROOT / "milebench").rglob("*")
        if p.is_file() and not SKIP(str(p.parent), [p.name]) and "__pycache__" not in p.parts
    }
    assert shipped - set(zipfile.ZipFile(wheel).namelist()) == set(), "package files missing from the wheel"

    bin_dir = fresh_venv(tmp_path / "venv", wheel, env)
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = run(bin_dir / "python", "-c", "import milebench; print(milebench.__file__)", cwd=work, env=env)
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv"), where.stdout + where.stderr

    checked = run(bin_dir / "milebench", "check-specs", cwd=work, env=env)
    assert checked.returncode == 0, checked.stderr
    write_smoke_scores(work)
    for stage in ("aggregate", "report"):
        done = run(bin_dir / "milebench", stage, "--run", "smoke", cwd=work, env=env)
        assert done.returncode == 0, done.stderr[-3000:]

    html = (work / "reports" / "smoke" / "report.html").read_text(encoding="utf-8")
    tex = (work / "reports" / "smoke" / "report.tex").read_text(encoding="utf-8")
    for model, shown in (("random", "33.3"), ("tiny-llava", "0.0"), ("tiny-qwen2-vl", "100.0")):
        row = re.search(rf'<tr data-model="{model}">(.*?)</tr>', html, re.S)
        assert row and re.search(
            rf'<td data-column="T-1"><span class="ours[^"]*">{shown}</span>', row.group(1)
        )
    assert r"\begin{document}" in tex and "Tiny" in tex
    assert any((work / "reports" / "smoke" / "figures").glob("*.pdf"))

    # Building images needs the checkout's containers/ folder, which an install does not carry.
    refused = run(bin_dir / "milebench", "image", "build", "--family", "kit", cwd=work, env=env)
    assert refused.returncode == 1 and "source checkout" in refused.stderr
    assert "Traceback" not in refused.stderr
