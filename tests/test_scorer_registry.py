"""A scorer variant is one registration: a scorer installed beside the kit by one entry point judges every
sample, and the aggregate, the report and the LaTeX carry it beside ``standard`` without a kit file edited.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_report import aggregate_and_report
from test_score_aggregate_run import fill
from test_score_command import paths_of, specs_dir  # noqa: F401

from milebench.benchmarks.milebench.score.run_aggregate import RunAggregate
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.plugins import installed_entry_points
from milebench.score.registry import (
    ENTRY_POINTS,
    scorer,
    scorer_names,
    variant_scorers,
)

LENIENT = '''
"""Counts every answer right: the largest gap a scorer can make."""


def judge(task, sample, prediction):
    return None, 1.0
'''


def clear() -> None:
    installed_entry_points.cache_clear()
    scorer_names.cache_clear()
    scorer.cache_clear()


@pytest.fixture
def lenient(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``lenient`` registered by a distribution of its own, put on the path as pip installs a wheel."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "lenientscore.py").write_text(textwrap.dedent(LENIENT), encoding="utf-8")
    meta = site / "lenientscore-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: lenientscore\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(f"[{ENTRY_POINTS}]\nlenient = lenientscore:judge\n")
    monkeypatch.syspath_prepend(str(site))
    clear()
    yield
    clear()


def test_a_third_scorer_appears_in_the_aggregate_and_both_reports(
    lenient: None,
    specs_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert variant_scorers() == ("lenient", "standard")
    fill(specs_dir)
    monkeypatch.chdir(tmp_path)
    assert aggregate_and_report(specs_dir) == 0
    paths = paths_of(specs_dir)
    result = RunAggregate.model_validate_json(paths.aggregate_json.read_text(encoding="utf-8"))
    multi = result.model("random", Mode.MULTI_IMAGE)
    assert sorted(multi.variants) == ["lenient", "standard"]
    lenient_columns = multi.variants["lenient"].columns
    assert lenient_columns is not None and lenient_columns["ActionSequence"] == pytest.approx(100.0)
    # ActionSequence: one of three answers right under the paper scorer, all three under lenient.
    assert multi.variants["lenient"].difference["ActionSequence"] == pytest.approx(100 - 100 / 3)
    html = (paths.reports / "report.html").read_text(encoding="utf-8")
    tex = (paths.reports / "report.tex").read_text(encoding="utf-8")
    for scorer_name in ("lenient", "standard"):
        assert f"<th>Real. {scorer_name}</th>" in html
        assert f"Real.\\ {scorer_name}" in tex
    assert html.index("Real. lenient") < html.index("Real. standard")  # variants by name


def test_an_aggregate_of_format_1_reads_as_the_standard_variant(specs_dir: Path) -> None:  # noqa: F811
    """Archived bundles hold aggregates written before the variants: their one variant was ``standard``."""
    fill(specs_dir)
    from milebench.benchmarks.milebench.score.run_aggregate import aggregate_run
    from milebench.benchmarks.milebench.spec.registry import load_specs

    specs = load_specs(specs_dir)
    now = aggregate_run(specs, specs.run("t"), paths_of(specs_dir), resamples=50).model_dump(mode="json")
    assert now["format"] == 2
    old = {key: value for key, value in now.items() if key != "format"}
    old["models"] = []
    for model in now["models"]:
        standard = model["variants"]["standard"]
        rest = {key: value for key, value in model.items() if key != "variants"}
        old["models"].append(
            rest | {"standard": standard["columns"], "scorer_difference": standard["difference"]}
        )
    assert RunAggregate.model_validate_json(json.dumps(old)).model_dump(mode="json") == now
