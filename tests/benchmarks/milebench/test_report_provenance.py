"""The smoke report's provenance: per environment what a reader looks for, differences marked, shorter
than the main table, with every package, job and data manifest one click away (HTML ``<details>``,
LaTeX: a document of its own). The HTML structure is checked always; the rendered heights in headless Chromium
where it is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from test_report import aggregate_and_report
from test_report_tools import chromium, compile_latex, open_in_chromium

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.provenance import job_provenance, write_provenance
from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.score.aggregate import summarise
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.io import atomic_write_json, atomic_write_jsonl
from milebench.provenance import TorchInfo, weights_revision
from milebench.report.render import latex_breakable
from milebench.spec.folder import DEFAULT_SPECS

MODE = Mode.MULTI_IMAGE
STARTED = datetime(2026, 1, 1, tzinfo=UTC)


def smoke_report(root: Path, tiny_image: str | None = None) -> RunPaths:
    """The smoke run's files as Snakemake leaves them: scores of its three models on all 29 tasks (three
    samples each), a fetch manifest, and an infer and a score manifest per cell, written in this
    environment; the tiny models' infer jobs loaded torch, the others did not. With ``tiny_image`` those
    jobs ran in that image instead, one package at another version (a second environment)."""
    specs_dir = root / "specs"
    shutil.copytree(DEFAULT_SPECS, specs_dir)
    run_file = specs_dir / "runs" / "smoke.yaml"
    smoke = yaml.safe_load(run_file.read_text(encoding="utf-8"))
    run_file.write_text(yaml.safe_dump({**smoke, "output_dir": str(root / "results" / "smoke")}))
    specs = load_specs(specs_dir)
    run = specs.run("smoke")
    paths = RunPaths.for_run(run, base=root)
    archives = [{"name": f"MileBench_part{k}.tar.gz", "size": 150000 + k, "sha256": f"{k}" * 64,
                 "url": f"{paths.mirror}/MileBench_part{k}.tar.gz"} for k in range(6)]  # fmt: skip
    atomic_write_json(
        paths.fetch_manifest,
        {"source": {"kind": "fixture", "path": str(paths.mirror), "repo_id": None, "revision": None,
                    "lock": str(paths.mirror / "milebench.lock.yaml")},
         "archives": archives, "data_root": str(paths.data_root),
         "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:00:09+00:00"},
    )  # fmt: skip
    base = job_provenance(
        stage="infer", specs=specs, run=run, model=specs.models["random"], task="ActionSequence",
        mode=MODE.value, outputs=(), fetch_manifest=paths.fetch_manifest, started_at=STARTED,
    )  # fmt: skip
    plain = base.environment.model_copy(update={"torch": "not loaded"})
    version = plain.packages.get("torch", "2.0.0")
    loaded = plain.model_copy(update={"torch": TorchInfo(version=version, cuda=None, cuda_available=False,
                                                         driver=None)})  # fmt: skip
    if tiny_image is not None:
        packages = {**plain.packages, "pydantic": "0.0.1"}
        loaded = loaded.model_copy(update={"image_id": tiny_image, "packages": packages})
    for name in run.models:
        model = specs.models[name]
        for i, task in enumerate(specs.run_tasks(run)):
            judged = {
                scorer: [
                    Judgment(task=task.name, mode=MODE, model=name, sample_id=s, scorer=scorer,
                             status="scored", score=float((s + i) % 3 == 0), image_quantity_level="Few")
                    for s in range(3)
                ]
                for scorer in ("paper", "standard")
            }  # fmt: skip
            rows = [j.model_dump(mode="json") for js in judged.values() for j in js]
            atomic_write_jsonl(paths.judgments(name, task.name, MODE), rows)
            score = summarise(
                task.name, name, MODE, "paper", judged["paper"], {"standard": judged["standard"]}
            )
            atomic_write_json(paths.task_score(name, task.name, MODE), score.model_dump(mode="json"))
            cell = {"model": name, "task": task.name, "weights_revision": weights_revision(model)}
            infer_env = plain if name == "random" else loaded
            write_provenance(
                paths.infer_provenance(name, task.name, MODE),
                base.model_copy(update={**cell, "stage": "infer", "environment": infer_env}),
            )
            write_provenance(
                paths.score_provenance(name, task.name, MODE),
                base.model_copy(update={**cell, "stage": "score", "environment": plain}),
            )
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert aggregate_and_report(specs_dir, "smoke") == 0
    return paths


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    return smoke_report(tmp_path_factory.mktemp("smoke"))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    return smoke_report(tmp_path_factory.mktemp("mixed"), tiny_image="sha256:" + "e" * 64)


class Rows(HTMLParser):
    """Table rows inside one element (by id), telling those folded into a ``<details>`` apart."""

    def __init__(self, element_id: str) -> None:
        super().__init__()
        self.element_id = element_id
        self.depth = 0
        self.folded = 0
        self.shown: list[dict[str, str | None]] = []
        self.hidden: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.depth == 0 and dict(attrs).get("id") != self.element_id:
            return
        self.depth += 1
        self.folded += tag == "details"
        if tag == "tr":
            (self.hidden if self.folded else self.shown).append(dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        if self.depth:
            self.depth -= 1
            self.folded -= tag == "details"

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)


def rows(html: str, element_id: str) -> Rows:
    parser = Rows(element_id)
    parser.feed(html)
    return parser


def test_provenance_shows_less_than_the_main_table_and_folds_the_rest(smoke: RunPaths) -> None:
    html = smoke.report_html.read_text(encoding="utf-8")
    main, provenance = rows(html, "main-multi-image"), rows(html, "provenance")
    assert len(provenance.shown) < len(main.shown), (len(provenance.shown), len(main.shown))
    # One header row and one row for the one environment; packages, jobs and manifests are folded.
    assert len(provenance.shown) == 2
    n_packages = len(package_rows(html))
    assert n_packages > 50
    assert len(provenance.hidden) >= n_packages + 2 * 3 * 29 + 30
    assert '<details id="provenance-full"><summary>' in html


def package_rows(html: str) -> list[str]:
    """The package rows of environment 1's folded list."""
    table = html.split('<table class="provenance packages" data-environment="1">', 1)[1].split("</table>", 1)[
        0
    ]
    return table.split("<tr")[1:]


def environment_rows(html: str) -> list[str]:
    table = html.split('<table class="provenance" id="environments">', 1)[1].split("</table>", 1)[0]
    return table.split("<tr data-environment=")[1:]


def test_the_environment_row_names_what_a_reader_looks_for(smoke: RunPaths) -> None:
    html = smoke.report_html.read_text(encoding="utf-8")
    for header in ("Kit commit", "Image", "Python", "torch / CUDA / GPU", "transformers", "Weights", "Data"):
        assert f'<th class="text">{header}</th>' in html
    (row,) = environment_rows(html)
    assert '<td data-fact="jobs">174 (infer 87, score 87)</td>' in row
    assert '<td data-fact="image">host</td>' in row and '<td data-fact="data">fixture</td>' in row
    assert re.search(r'<td data-fact="kit">[0-9a-f]{12}( \(dirty[^)]*\))?</td>', row)
    assert re.search(r'<td data-fact="python" title="[^"]+">3\.\d+\.\d+</td>', row)
    # Score jobs never load torch; the tiny models' infer jobs did.
    assert re.search(
        r'<td data-fact="torch">not loaded \(116 jobs\); [^<]*, CUDA none, no GPU \(58 jobs\)', row
    )
    weights = re.search(r'<td data-fact="weights">([^<]*)</td>', row)
    assert weights and weights.group(1) == (
        "random builtin, tiny-llava tiny llava seed 0, tiny-qwen2-vl tiny qwen2-vl seed 0"
    )
    assert 'class="differs"' not in row


def test_differences_between_environments_are_marked(mixed: RunPaths) -> None:
    html = mixed.report_html.read_text(encoding="utf-8")
    host, image = environment_rows(html)
    marked = 'class="differs" title="differs between environments"'
    assert f'<td data-fact="image" {marked}>host</td>' in host
    assert f'<td data-fact="image" {marked}>{"e" * 12}</td>' in image  # the short id, as docker shows it
    assert f"job environment 2: image sha256:{'e' * 64}, platform" in html
    # Environment 1 ran no job that loaded torch: nothing to compare, nothing marked.
    assert 'data-fact="torch" class="differs"' not in html
    assert re.search(rf'<td data-fact="packages" {marked}>\d+; 1 differ: pydantic 0\.0\.1</td>', image)
    assert '<td data-fact="python"' in host and 'data-fact="python" class="differs"' not in host
    assert '<tr class="differs"><th scope="row" class="text">pydantic</th><td>0.0.1</td></tr>' in html


def test_input_regimes_read_as_words_with_their_ids_beside(smoke: RunPaths) -> None:
    """Each model's regime in the truncation table is its label, the id (``ctx2048-paper-<hash>``, the
    folder of its prepared prompts) the tooltip in HTML and small print beneath in LaTeX."""
    specs = load_specs(smoke.root / "specs")
    run = specs.run("smoke")
    html = smoke.report_html.read_text(encoding="utf-8")
    table = html.split('id="truncation-summary-multi-image">', 1)[1].split("</table>", 1)[0]
    tex = smoke.report_tex.read_text(encoding="utf-8")
    for model in run.models:
        regime = model_regime(specs, run, model, MODE)
        assert regime.id not in regime.label and not re.search(r"[0-9a-f]{10}", regime.label)
        row = table.split(f'<tr data-model="{model}">', 1)[1].split("</tr>", 1)[0]
        assert (
            f'<td class="text"><span class="regime" title="input regime {regime.id}">{regime.label}</span>'
            in row
        )
        assert f"{regime.label}\\newline{{\\tiny\\texttt{{{latex_breakable(regime.id)}}}}}" in tex
    budgeted = [model_regime(specs, run, m, MODE) for m in run.models if specs.models[m].max_context_len]
    assert budgeted and all(r.label.startswith("context ") for r in budgeted)


def test_latex_keeps_the_summary_and_moves_the_full_record_to_its_own_document(smoke: RunPaths) -> None:
    tex = smoke.report_tex.read_text(encoding="utf-8")
    full = smoke.report_provenance_tex.read_text(encoding="utf-8")
    provenance = tex.split(r"\subsection*{Provenance}", 1)[1].split(r"\subsection*{Notes}", 1)[0]
    assert r"\emph{job environment 1}" in provenance and "job environment 2" not in provenance
    assert r"Kit commit & \texttt{" in provenance and r"Data & \texttt{fixture} \\" in provenance
    assert rf"\texttt{{{smoke.report_provenance_tex.name}}}, a document of its own" in provenance
    assert "Package & Version" not in tex and r"\appendix" not in tex
    assert r"\documentclass" in full and full.rstrip().endswith(r"\end{document}")
    assert "Package & Version" in full and r"\subsection*{job environment 1: " in full
    assert full.count(r"\texttt{infer ") == full.count(r"\texttt{score ") == 3 * 29


@pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk absent: run .ci/report-tools.sh")
def test_the_provenance_document_compiles_on_its_own(smoke: RunPaths, tmp_path: Path) -> None:
    work = tmp_path / "tex"
    work.mkdir()
    shutil.copy(smoke.report_provenance_tex, work)
    pdf = compile_latex(work, smoke.report_provenance_tex.name)
    if shutil.which("pdfinfo"):
        info = subprocess.run(["pdfinfo", pdf.name], cwd=work, capture_output=True, text=True).stdout
        pages = re.search(r"Pages:\s+(\d+)", info)
        assert pages and int(pages.group(1)) > 1  # every package and job of the run, over pages


@pytest.mark.skipif(chromium() is None, reason="chromium absent: run .ci/report-tools.sh")
def test_rendered_provenance_is_shorter_than_the_main_table(smoke: RunPaths, tmp_path: Path) -> None:
    errors, _, _, (main, provenance, opened, shown) = open_in_chromium(
        smoke.report_html.resolve(),
        tmp_path / "profile",
        evaluate=(
            "document.getElementById('main-multi-image').getBoundingClientRect().height",
            "document.getElementById('provenance').getBoundingClientRect().height",
            "document.querySelector('#provenance-full summary').click(),"
            " document.getElementById('provenance-full').open",
            "document.querySelector('table.packages tr').getBoundingClientRect().height",
        ),
    )
    assert errors == []
    assert 0 < provenance < main, (provenance, main)
    assert opened is True and shown > 0  # one click shows the full package list
