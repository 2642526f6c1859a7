"""The real specs folder: contents match the paper and the upstream data, schemas are fresh."""

from __future__ import annotations

import argparse
import csv
import logging
import shutil
from pathlib import Path
from statistics import mean

import pytest
import yaml

from milebench.benchmarks.milebench.paper import load_paper
from milebench.benchmarks.milebench.spec.data_lock import load_lock
from milebench.benchmarks.milebench.spec.registry import Specs, load_specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, HubSource, Mode
from milebench.benchmarks.milebench.spec.task import Group, QuestionType
from milebench.cli import main
from milebench.commands.specs import export, schemas_folder
from milebench.spec.base import SpecError, load_spec
from milebench.spec.benchmark import benchmarks
from milebench.spec.context import SourceKind
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.model import (
    ApiModel,
    BuiltinModel,
    HubWeights,
    ModelSpec,
    Section,
    TinyWeights,
)
from milebench.spec.weights_lock import WEIGHTS_LOCK, WeightsLock, check_weights_lock, load_weights_lock

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"

# The dataset loop of the official eval.sh: the exact upstream folder names.
UPSTREAM_TASKS = [
    "ALFRED",
    "ActionLocalization",
    "ActionPrediction",
    "ActionSequence",
    "CLEVR-Change",
    "CharacterOrder",
    "CounterfactualInference",
    "DocVQA",
    "EgocentricNavigation",
    "GPR1200",
    "IEdit",
    "ImageNeedleInAHaystack",
    "MMCoQA",
    "MovingAttribute",
    "MovingDirection",
    "MultiModalQA",
    "OCR-VQA",
    "ObjectExistence",
    "ObjectInteraction",
    "ObjectShuffle",
    "SceneTransition",
    "SlideVQA",
    "Spot-the-Diff",
    "StateChange",
    "TQA",
    "TextNeedleInAHaystack",
    "WebQA",
    "WikiVQA",
    "nuscenes",
]
OPEN_ENDED = {
    "Spot-the-Diff",
    "CLEVR-Change",
    "IEdit",
    "MMCoQA",
    "ALFRED",
    "TextNeedleInAHaystack",
    "ImageNeedleInAHaystack",
}
DIAGNOSTIC = {"TextNeedleInAHaystack", "ImageNeedleInAHaystack", "GPR1200"}
REAL_GROUPS = [Group.T1, Group.T2, Group.T3, Group.T4, Group.S1, Group.S2, Group.S3, Group.S4, Group.S5]
DIAG_GROUPS = [Group.N1, Group.N2, Group.I1]
OVERALL = {"overall_real": REAL_GROUPS, "overall_diag": DIAG_GROUPS}
TOLERANCE = 0.05


@pytest.fixture(scope="module")
def specs() -> Specs:
    return load_specs(DEFAULT_SPECS)


def _reference_csv(name: str) -> list[dict[str, str]]:
    path = REFERENCE / name
    if not path.is_file():
        pytest.skip(f"reference CSV {path} is not present in this checkout")
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_tasks_are_the_29_upstream_folders(specs: Specs) -> None:
    assert sorted(specs.tasks) == sorted(UPSTREAM_TASKS)
    assert sum(t.n_samples for t in specs.tasks.values()) == 6440
    for name, task in specs.tasks.items():
        expected_n = 320 if "NeedleInAHaystack" in name else 600 if name == "GPR1200" else 200
        assert task.n_samples == expected_n, name
        assert (task.question_type is QuestionType.OPEN_ENDED) == (name in OPEN_ENDED), name
        assert task.has_adversarial == (name not in DIAGNOSTIC), name
        assert task.labelled_choices == (name != "GPR1200"), name
        assert task.source_dataset.strip(), name


def test_every_group_has_its_tasks(specs: Specs) -> None:
    by_group: dict[Group, set[str]] = {}
    for task in specs.tasks.values():
        by_group.setdefault(task.group, set()).add(task.name)
    assert by_group[Group.T1] == {"ActionLocalization", "ActionPrediction", "ActionSequence"}
    assert by_group[Group.S4] == {"MMCoQA", "ALFRED"}
    assert by_group[Group.I1] == {"GPR1200"}
    assert set(by_group) == set(Group)
    names = {t.group: t.group_name for t in specs.tasks.values()}
    assert names[Group.T1] == "Action Understanding and Prediction"
    assert names[Group.S3] == "Visual Relation Inference"


def test_models_cover_the_paper_table(specs: Specs) -> None:
    with_paper_name = {m.paper_name: m for m in specs.models.values() if m.paper_name is not None}
    assert len(with_paper_name) == 23
    assert set(with_paper_name) == {row.paper_name for row in load_paper(specs).main_table.rows}
    for row in load_paper(specs).main_table.rows:
        model = specs.models[row.model]
        assert (model.paper_name, model.section, model.size) == (row.paper_name, row.section, row.size)
    kit = {n: m for n, m in specs.models.items() if m.section is Section.KIT}
    assert {"oracle", "tiny-llava", "tiny-qwen2-vl"} <= set(kit)
    assert all(isinstance(m.weights, BuiltinModel | TinyWeights) for m in kit.values())
    assert not set(kit) & {m.name for m in with_paper_name.values()}
    assert len(specs.models) == len(with_paper_name) + len(kit)


def test_model_paper_names_match_csv(specs: Specs) -> None:
    rows = _reference_csv("paper_main_table.csv")
    assert sorted(m.paper_name for m in specs.models.values() if m.paper_name) == sorted(
        r["model"] for r in rows
    )


def test_model_settings_follow_the_reference(specs: Specs) -> None:
    m = specs.models
    assert (m["llava-1.5-7b"].max_context_len, m["llava-1.5-7b"].n_tokens_per_image) == (4096, 576)
    # Yi-VL's 448-px tower with 14-px patches gives 32 x 32 tokens, not LLaVA-1.5's 576.
    assert (m["yi-vl"].max_context_len, m["yi-vl"].n_tokens_per_image) == (4096, 1024)
    qwen = m["qwen-vl-chat"]
    assert (qwen.max_context_len, qwen.n_tokens_per_image, qwen.max_images) == (8192, 256, 32)
    api_ids = {n: s.weights.model_id for n, s in m.items() if isinstance(s.weights, ApiModel)}
    assert api_ids == {
        "gpt-4v": "gpt-4-turbo",
        "gpt-4o": "gpt-4o",
        "gemini-1.0": "gemini-1.0-pro-vision-001",
        "gemini-1.5": "gemini-1.5-pro-latest",
        "claude-3-opus": "claude-3-opus-20240229",
    }
    for name, spec in m.items():
        assert spec.generation.do_sample is False, name
        if isinstance(spec.weights, ApiModel):
            assert spec.container == "api", name
        if spec.adapter == "unported":
            assert spec.container is None, name
        if isinstance(spec.weights, HubWeights):
            assert spec.weights.revision is None, name
    assert m["llava-1.5-7b"].container == m["llava-1.5-13b"].container == "llava15"
    tiny = m["tiny-llava"]
    assert (tiny.max_context_len, tiny.n_tokens_per_image, tiny.generation.max_new_tokens) == (2048, 16, 8)


def test_every_paper_model_traces_its_budget_to_a_source_or_says_why_not(specs: Specs) -> None:
    """Every model of the paper's table in the specs folder: a value with where it comes from, or
    null with a ``none`` source that says why; a set max_images has a source too."""
    paper_models = [m for m in specs.models.values() if m.paper_model]
    assert len(paper_models) == len(load_paper(specs).main_table.rows) - 1  # every row but Random
    for model in paper_models:
        for name in ("max_context_len", "n_tokens_per_image", "max_images"):
            value, source = getattr(model, name), getattr(model.context_sources, name)
            if name == "max_images" and value is None and source is None:
                continue
            assert source is not None and source.detail.strip(), (model.name, name)
            assert (source.kind is SourceKind.NONE) == (value is None), (model.name, name)


def test_a_budget_without_its_source_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    spec = yaml.safe_load((DEFAULT_SPECS / "models" / "yi-vl.yaml").read_text(encoding="utf-8"))
    del spec["context_sources"]["n_tokens_per_image"]
    path = tmp_path / "yi-vl.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    with pytest.raises(SpecError, match=r"yi-vl\.yaml.*context_sources\.n_tokens_per_image"):
        load_spec(path, ModelSpec)
    spec["context_sources"]["n_tokens_per_image"] = {"kind": "none", "detail": "unknown"}
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    with pytest.raises(SpecError, match="kind none, but n_tokens_per_image is 1024"):
        load_spec(path, ModelSpec)


def test_runs(specs: Specs) -> None:
    assert {"smoke", "paper", "ports"} <= set(specs.runs)
    smoke, paper = specs.runs["smoke"], specs.runs["paper"]
    assert smoke.models == ("random", "tiny-llava", "tiny-qwen2-vl")
    assert smoke.modes == (Mode.MULTI_IMAGE,)
    assert isinstance(smoke.data, FixtureSource) and smoke.data.samples_per_task == 3
    paper_models = {row.model for row in load_paper(specs).main_table.rows}
    assert set(paper.models) == paper_models and len(paper.models) == 23
    assert set(paper.modes) == set(Mode)
    assert isinstance(paper.data, HubSource)
    assert len(specs.run_tasks(paper)) == 29


def test_the_ports_run_holds_the_tiny_model_of_every_family_ported_from_its_original_code(
    specs: Specs,
) -> None:
    """A kit tiny model that runs a paper model's adapter kind, and is not in the smoke run, is in the
    ports run; every ports model is such a tiny model, on the fixture in multi-image mode."""
    smoke, ports = specs.runs["smoke"], specs.runs["ports"]
    paper_kinds = {m.adapter for m in specs.models.values() if m.paper_model}
    ported = {
        name
        for name, m in specs.models.items()
        if isinstance(m.weights, TinyWeights) and m.adapter in paper_kinds and name not in smoke.models
    }
    assert ported and set(ports.models) == ported
    assert ports.modes == (Mode.MULTI_IMAGE,) and isinstance(ports.data, FixtureSource)
    assert len(specs.run_tasks(ports)) == len(specs.tasks)


def test_data_lock_names_the_six_archives(specs: Specs) -> None:
    lock_ref = specs.runs["paper"].data.lock  # type: ignore[union-attr]
    lock = load_lock(specs.root / lock_ref, require_complete=False)
    assert lock.repo_id == "FreedomIntelligence/MileBench"
    assert [a.name for a in lock.archives] == [f"MileBench_part{i}.tar.gz" for i in range(6)]


def test_weights_lock_names_only_hub_models(specs: Specs) -> None:
    path = specs.root / WEIGHTS_LOCK
    lock = load_weights_lock(path)
    hub_models = {n for n, m in specs.models.items() if isinstance(m.weights, HubWeights)}
    assert set(lock.revisions) <= hub_models
    check_weights_lock(lock, specs.models, path)


@pytest.mark.parametrize("name", ["gpt-4v", "no-such-model", "tiny-llava"])
def test_weights_lock_rejects_models_without_hub_weights(specs: Specs, name: str) -> None:
    lock = WeightsLock(revisions={name: "0" * 40})
    with pytest.raises(SpecError) as err:
        check_weights_lock(lock, specs.models, Path("weights.lock.yaml"))
    assert f"revisions.{name}" in str(err.value)


def test_weights_lock_rejects_short_commits(tmp_path: Path) -> None:
    path = tmp_path / "weights.lock.yaml"
    path.write_text("revisions:\n  llava-1.5-7b: abc123\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_weights_lock(path)
    assert str(path) in str(err.value) and "revisions.llava-1.5-7b" in str(err.value)


def test_paper_rows_equal_the_csv(specs: Specs) -> None:
    rows = _reference_csv("paper_main_table.csv")
    assert len(rows) == len(load_paper(specs).main_table.rows)
    for csv_row, row in zip(rows, load_paper(specs).main_table.rows, strict=True):
        assert row.paper_name == csv_row["model"]
        assert row.section == csv_row["section"]
        assert row.size == (None if csv_row["size"] == "-" else csv_row["size"])
        assert {g.value: v for g, v in row.groups.items()} == {g.value: float(csv_row[g]) for g in Group}
        assert row.overall_real == float(csv_row["overall_real"])
        assert row.overall_diag == float(csv_row["overall_diag"])


def test_side_tables_equal_the_csv(specs: Specs) -> None:
    by_paper_name = {m.paper_name: n for n, m in specs.models.items() if m.paper_name}
    contamination = _reference_csv("paper_contamination.csv")
    assert [(r.model, r.regular, r.adv, r.delta) for r in load_paper(specs).contamination.rows] == [
        (by_paper_name[r["model"]], float(r["regular"]), float(r["adv"]), float(r["delta"]))
        for r in contamination
    ]
    quantity = _reference_csv("paper_image_quantity.csv")
    assert [(r.model, r.few, r.medium, r.many) for r in load_paper(specs).image_quantity.rows] == [
        (by_paper_name[r["model"]], float(r["few"]), float(r["medium"]), float(r["many"])) for r in quantity
    ]


def test_side_tables_and_footnotes_name_models(specs: Specs) -> None:
    paper = load_paper(specs)
    named = [r.model for r in paper.contamination.rows] + [r.model for r in paper.image_quantity.rows]
    named += list(paper.main_table.footnotes) + [i.model for i in paper.main_table.inconsistencies]
    assert set(named) <= set(specs.models)
    assert "lwm" in paper.main_table.footnotes
    for r in paper.contamination.rows:
        assert r.delta == pytest.approx(r.regular - r.adv, abs=1e-9), r.model


def test_group_means_reproduce_overall_except_listed_inconsistencies(specs: Specs) -> None:
    listed = {(i.model, i.column): i for i in load_paper(specs).main_table.inconsistencies}
    seen = set()
    for row in load_paper(specs).main_table.rows:
        for column, groups in OVERALL.items():
            computed = mean(row.groups[g] for g in groups)
            printed = getattr(row, column)
            entry = listed.get((row.model, column))
            if entry is None:
                assert abs(computed - printed) <= TOLERANCE, (row.model, column, computed, printed)
                continue
            seen.add((row.model, column))
            assert abs(computed - printed) > TOLERANCE, (row.model, column)
            assert (entry.printed, entry.computed) == (printed, round(computed, 2))
    overall_listed = {key for key in listed if key[1] in OVERALL}
    assert seen == overall_listed
    assert {("gpt-4v", "overall_diag"), ("gpt-4o", "overall_diag"), ("random", "overall_real")} <= seen


def test_gpt4_diag_is_the_mean_of_the_needles_only(specs: Specs) -> None:
    rows = {r.model: r for r in load_paper(specs).main_table.rows}
    for name in ("gpt-4v", "gpt-4o"):
        row = rows[name]
        assert round(mean([row.groups[Group.N1], row.groups[Group.N2]]), 1) == row.overall_diag


def test_copied_llava_groups_really_coincide(specs: Specs) -> None:
    entries = [i for i in load_paper(specs).main_table.inconsistencies if i.column == "T-1..T-4"]
    assert {i.model for i in entries} == {"llava-1.6-7b", "llava-1.5-13b"}
    rows = {r.model: r for r in load_paper(specs).main_table.rows}
    first = [Group.T1, Group.T2, Group.T3, Group.T4]
    assert [rows["llava-1.6-7b"].groups[g] for g in first] == [rows["llava-1.5-13b"].groups[g] for g in first]
    assert rows["llava-1.6-7b"].groups[Group.S1] != rows["llava-1.5-13b"].groups[Group.S1]
    for entry in entries:
        assert entry.printed == entry.computed == rows[entry.model].groups[Group.T1]


def test_schemas_are_fresh(tmp_path: Path) -> None:
    """Each benchmark's committed schemas are exactly those of its declared spec kinds, as exported now."""
    export(argparse.Namespace(out=tmp_path))
    for benchmark in benchmarks().values():
        fresh_folder, committed = tmp_path / benchmark.name, schemas_folder(benchmark, None)
        expected = sorted(f"{name}.schema.json" for name in benchmark.spec_kinds())
        assert sorted(p.name for p in fresh_folder.iterdir()) == expected
        assert sorted(p.name for p in committed.glob("*.json")) == expected
        for name in expected:
            fresh = (fresh_folder / name).read_bytes()
            assert fresh.endswith(b"}\n")
            assert (committed / name).read_bytes() == fresh, (
                f"{name} is stale: run `milebench export-schemas`"
            )


def test_check_specs_cli_accepts_the_real_specs(specs: Specs, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        assert main(["--specs", str(DEFAULT_SPECS), "check-specs"]) == 0
    counts = (len(specs.tasks), len(specs.models), len(specs.runs), len(load_paper(specs).main_table.rows))
    assert "{} tasks, {} models, {} runs, {} paper rows".format(*counts) in caplog.text


def test_check_specs_leaves_out_a_benchmark_a_whole_folder_has_no_folder_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A whole specs folder of MileBench's alone is checked as MileBench's; MMLongEmbed's missing folder is
    said, not an error. Its folder present but broken is an error naming the file."""
    root = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, root, ignore=shutil.ignore_patterns("mmlongembed"))
    with caplog.at_level(logging.INFO):
        assert main(["--specs", str(root), "check-specs"]) == 0
    assert "MileBench specs OK" in caplog.text and "MMLongEmbed: no specs folder mmlongembed" in caplog.text
    (root / "mmlongembed" / "models").mkdir(parents=True)
    (root / "mmlongembed" / "models" / "bm25.yaml").write_text("name: bm25\nkind: nonsense\n")
    assert main(["--specs", str(root), "check-specs"]) == 2
