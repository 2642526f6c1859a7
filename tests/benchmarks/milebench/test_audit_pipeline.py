"""The audits a run spec declares: checked when the specs load (file and field named), run by Snakemake
as jobs of the run, and rendered in its HTML and LaTeX report as the audit wrote them."""

from __future__ import annotations

import argparse
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from pipeline_runs import TASKS, snakemake

from milebench.audit.batch import BatchAudit
from milebench.audit.render import AuditTable, batch_tables
from milebench.benchmarks.milebench.audit.drift import DriftAudit
from milebench.benchmarks.milebench.audit.drift_render import drift_tables
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import MAX_BATCH_SIZE, MAX_REPEATS, MAX_RESAMPLES
from milebench.cli import main
from milebench.commands.specs import check
from milebench.spec.base import SpecError
from milebench.spec.folder import DEFAULT_SPECS

DIAGNOSTIC = "TextNeedleInAHaystack"
"""A task without an adversarial set."""


def audited_run(specs: Path, name: str, audit: dict[str, object], **extra: object) -> Path:
    path = specs / "runs" / f"{name}.yaml"
    run = {
        "name": name,
        "description": "audit plan",
        "models": ["random", "tiny-llava"],
        "tasks": TASKS,
        "modes": ["multi-image", "adversarial"],
        "data": {"kind": "fixture", "seed": 1, "samples_per_task": 2},
        **extra,
    }
    if audit:
        run["audit"] = audit
    path.write_text(yaml.safe_dump(run), encoding="utf-8")
    return path


@pytest.fixture
def specs_dir(tmp_path: Path) -> Path:
    shutil.copytree(DEFAULT_SPECS, tmp_path / "specs")
    return tmp_path / "specs"


@pytest.mark.parametrize(
    ("audit", "field", "says"),
    [
        ({"batch": [{"model": "tiny-qwen2-vl"}]}, "audit.batch.0.model", "not in this run"),
        ({"batch": [{"model": "tiny-llava", "variant": "turbo"}]}, "audit.batch.0.variant", "'turbo'"),
        (
            {"batch": [{"model": "tiny-llava", "tasks": ["WebQA"]}]},
            "audit.batch.0.tasks.0",
            "not in this run",
        ),
        (
            {"batch": [{"model": "tiny-llava", "mode": "combined-image"}]},
            "audit.batch.0.mode",
            "combined-image",
        ),
        (
            {"batch": [{"model": "tiny-llava", "mode": "adversarial", "tasks": [DIAGNOSTIC]}]},
            "audit.batch.0.tasks.0",
            "no adversarial set",
        ),
        ({"batch": [{"model": "tiny-llava", "scorer": "lenient"}]}, "audit.batch.0.scorer", "unknown scorer"),
        ({"batch": [{"model": "tiny-llava", "batch_sizes": [0]}]}, "audit.batch.0.batch_sizes.0", "1"),
        ({"batch": [{"model": "tiny-llava"}, {"model": "tiny-llava"}]}, "audit", "two audits write"),
        ({"drift": [{"model_a": "tiny-llava"}]}, "audit.drift.0", "two sides"),
        ({"drift": [{"model_a": "tiny-llava", "run_b": "elsewhere"}]}, "audit.drift.0.run_b", "'elsewhere'"),
        ({"drift": [{"model_a": "tiny-llava", "model_b": "gpt-4o"}]}, "audit.drift.0.model_b", "not in run"),
        ({"drift": [{"model_a": "gpt-4o", "model_b": "random"}]}, "audit.drift.0.model_a", "not in this run"),
        (
            {"drift": [{"model_a": "tiny-llava", "run_b": "smoke", "mode": "adversarial"}]},
            "audit.drift.0.mode",
            "smoke",
        ),
    ],
)
def test_a_bad_audit_plan_names_the_run_file_and_the_field(
    specs_dir: Path, audit: dict[str, object], field: str, says: str
) -> None:
    path = audited_run(specs_dir, "audited", audit)
    with pytest.raises(SpecError) as err:
        check(argparse.Namespace(specs=specs_dir))
    line = next(line for line in str(err.value).splitlines() if line.startswith(f"{path}: {field}:"))
    assert says in line


BATCH, DRIFT = {"model": "tiny-llava"}, {"model_a": "random", "model_b": "tiny-llava"}


@pytest.mark.parametrize(
    ("kind", "field", "bound", "says"),
    [
        ("batch", "repeats", MAX_REPEATS, f"less than or equal to {MAX_REPEATS}"),
        ("drift", "resamples", MAX_RESAMPLES, f"less than or equal to {MAX_RESAMPLES}"),
        ("batch", "batch_sizes", MAX_BATCH_SIZE, f"less than or equal to {MAX_BATCH_SIZE}"),
        ("batch", "batch_sizes", 1, "greater than or equal to 1"),
    ],
)
def test_audit_sizes_are_bounded_and_one_line_gives_the_bound(
    specs_dir: Path, caplog: pytest.LogCaptureFixture, kind: str, field: str, bound: int, says: str
) -> None:
    """A plan at its bound loads; one past it (10^12 repeats or resamples never end, a batch size of -4)
    is refused by `check-specs` in one line naming the file, the field and the bound, exit 2."""
    beyond = 10**12 if bound > 1 else -4
    for value, code in ((bound, 0), (beyond, 2)):
        given = [value] if field == "batch_sizes" else value
        path = audited_run(
            specs_dir, "audited", {kind: [{**(BATCH if kind == "batch" else DRIFT), field: given}]}
        )
        caplog.clear()
        assert main(["--specs", str(specs_dir), "check-specs"]) == code
    where = f"audit.{kind}.0.{field}" + (".0" if field == "batch_sizes" else "")
    assert caplog.text.count(f"{path}: ") == 1 and "Traceback" not in caplog.text
    assert f"{path}: {where}: Input should be {says}" in caplog.text


def test_a_run_without_audits_keeps_its_hash_and_a_valid_plan_loads(specs_dir: Path) -> None:
    plain = audited_run(specs_dir, "plain", {})
    assert "audit" not in yaml.safe_load(plain.read_text())
    audited_run(
        specs_dir,
        "audited",
        {"batch": [{"model": "tiny-llava"}], "drift": [{"model_a": "random", "model_b": "tiny-llava"}]},
    )
    assert check(argparse.Namespace(specs=specs_dir)) == 0
    specs = load_specs(specs_dir)
    assert "audit" not in specs.run("plain").model_dump(mode="json")


class Tables(HTMLParser):
    """The text of every cell of each table inside the element with id ``audit``."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.depth or dict(attrs).get("id") == "audit":
            self.depth += 1
        if not self.depth:
            return
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if not self.depth:
            return
        self.depth -= 1
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def as_rows(table: AuditTable) -> list[list[str]]:
    return [list(table.header), *(list(row) for row in table.rows)]


@pytest.mark.slow
def test_snakemake_runs_the_declared_audits_and_the_report_renders_their_files(tmp_path: Path) -> None:
    """Run B answers with the batched variant; run A declares a batch audit of tiny-llava and its drift
    against run B. The report's audit tables are the audit files' tables, cell for cell."""
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    single = {"modes": ["multi-image"], "models": ["tiny-llava"]}
    audited_run(specs, "batched", {}, execution={"tiny-llava": "batched"}, **single)
    batch = {"model": "tiny-llava", "batch_sizes": [1, 2], "repeats": 1}
    audited_run(
        specs,
        "audited",
        {"batch": [batch], "drift": [{"model_a": "tiny-llava", "run_b": "batched"}]},
        **single,
    )
    snakemake(tmp_path, "--cores", "2", "main_table", "--config", "run=batched", f"specs={specs}")
    snakemake(tmp_path, "--cores", "2", "--config", "run=audited", f"specs={specs}")

    folder = tmp_path / "reports" / "audited" / "audit"
    batch_file, drift_file = (
        folder / "batch-tiny-llava-multi-image.json",
        folder / "drift-tiny-llava-tiny-llava-batched-multi-image.json",
    )
    batch_record = BatchAudit.model_validate_json(batch_file.read_text())
    drift_record = DriftAudit.model_validate_json(drift_file.read_text())
    assert batch_record.batch_sizes == (1, 2) and batch_record.repeats == 1
    assert sorted({row.task for row in batch_record.summary}) == sorted([*TASKS, "all"])
    assert [row.task for row in drift_record.tasks] == [*TASKS, "all"]
    assert drift_record.tasks[-1].flips.total == 2 * len(TASKS)
    assert (
        (folder / "batch-tiny-llava-multi-image.md").read_text().startswith("## Batch invariance: tiny-llava")
    )

    expected = [as_rows(t) for t in [*batch_tables(batch_record), *drift_tables(drift_record)]]
    parser = Tables()
    parser.feed((tmp_path / "reports" / "audited" / "report.html").read_text())
    assert parser.tables == expected
    tex = (tmp_path / "reports" / "audited" / "report.tex").read_text()
    for table in expected:
        assert " & ".join(table[1]).replace("%", r"\%") in tex

    # The aggregate does not depend on the audit section: editing it re-runs the audit and the report only.
    run_file = specs / "runs" / "audited.yaml"
    data = yaml.safe_load(run_file.read_text())
    data["audit"]["batch"][0]["seed"] = 7
    run_file.write_text(yaml.safe_dump(data))
    planned = snakemake(tmp_path, "-n", "--config", "run=audited", f"specs={specs}")
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", planned[planned.index("Job stats") :], re.MULTILINE))
    assert jobs == {"audit_batch_0": "1", "report": "1", "all": "1", "total": "3"}
    assert json.loads(batch_file.read_text())["seed"] == 0


def test_a_batch_audit_of_another_variant_runs_in_that_variants_image(
    specs_dir: Path, tmp_path: Path
) -> None:
    """Under deployment docker, a batch audit of tiny LLaVA's vllm variant in a run of its paper choices
    plans its job in the vllm image, with that image's record as input, not the model's own."""
    batch = {"model": "tiny-llava", "variant": "vllm", "tasks": TASKS[:1]}
    audited_run(specs_dir, "audited", {"batch": [batch]}, modes=["multi-image"])
    config = ["--config", "run=audited", f"specs={specs_dir}", "deployment=docker"]
    plan = snakemake(tmp_path, "-n", "-p", "audit", *config)
    job = plan[plan.index("rule audit_batch_0:") :]
    job = job[: job.index("\n\n")]
    own = load_specs(specs_dir).models["tiny-llava"].container
    assert "results/images/vllm.json" in job and f"results/images/{own}.json" not in job
    assert "--in-image vllm audit batch" in plan and "--variant vllm" in plan
