"""The MMLongEmbed paper spec and the verdict cells: MileBench's states for known published values,
every published value shown, and a paper spec naming an unknown model refused by file and field."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import yaml

from milebench.benchmarks.mmlongembed.analysis import (
    ModelInterference,
    ScaleComparison,
    easy_hard,
    scale_pairs,
    split,
)
from milebench.benchmarks.mmlongembed.paper import EmbedPaper, load_embed_paper, paper_path
from milebench.benchmarks.mmlongembed.records import Query
from milebench.benchmarks.mmlongembed.spec import (
    LINEAGE,
    Bm25Model,
    SentenceTransformersModel,
    load_embed_specs,
)
from milebench.benchmarks.mmlongembed.statistics import PairedTest, spread
from milebench.benchmarks.mmlongembed.verdict import EmbedVerdict, OurAverage, Ours, build_verdict
from milebench.spec.base import SpecError, spec_hash
from milebench.spec.folder import DEFAULT_SPECS
from milebench.verdict import Agreement, VerdictCell


def paper(**models: str) -> EmbedPaper:
    """The shipped paper spec with kit models named (paper name -> kit name)."""
    data = yaml.safe_load(paper_path(DEFAULT_SPECS).read_text(encoding="utf-8"))
    for row in [*data["averages"]["rows"], *data["interference"]]:
        row["model"] = models.get(row["paper_name"])
    return EmbedPaper.model_validate(data)


def verdict(
    p: EmbedPaper,
    tolerance: float = 0.5,
    averages: Mapping[str, OurAverage] | None = None,
    scale: Sequence[ScaleComparison] = (),
    interference: Mapping[str, ModelInterference] | None = None,
) -> EmbedVerdict:
    return build_verdict(p, Ours(averages or {}, scale, interference or {}), tolerance, 0.95, 100, 0)


def cell(v: EmbedVerdict, model: str, column: str) -> VerdictCell:
    return next(c for c in v.cells if c.model == model and c.column == column)


@pytest.mark.parametrize(
    ("ours", "interval", "state"),
    [
        (58.40, (55.0, 61.0), Agreement.REPRODUCED),  # within 0.5 of 58.61
        (57.00, (55.0, 61.0), Agreement.CONSISTENT),  # outside, but 58.61 lies in our interval
        (57.00, (55.0, 58.0), Agreement.NOT_REPRODUCED),
    ],
)
def test_average_p1_of_a_known_published_value(
    ours: float, interval: tuple[float, float], state: Agreement
) -> None:
    p = paper(**{"RzenEmbed-v2-7B": "rzen"})
    ours_row = OurAverage(value=ours, subsets=14, ci_low=interval[0], ci_high=interval[1])
    c = cell(verdict(p, averages={"rzen": ours_row}), "RzenEmbed-v2-7B", "average")
    assert c.published == 58.61 and c.ours == ours and c.difference == pytest.approx(ours - 58.61)
    assert c.agreement is state and c.coverage == 1.0


def test_an_average_over_fewer_subsets_than_the_papers_has_no_score() -> None:
    p = paper(**{"RzenEmbed-v2-7B": "rzen"})
    v = verdict(p, averages={"rzen": OurAverage(value=58.61, subsets=6, ci_low=55.0, ci_high=61.0)})
    c = cell(v, "RzenEmbed-v2-7B", "average")
    assert c.ours is None and c.agreement is Agreement.NO_SCORE and c.coverage == pytest.approx(6 / 14)


def test_every_published_value_is_a_cell_even_without_a_run_model() -> None:
    p = paper()
    v = verdict(p)
    assert len([c for c in v.cells if c.column == "average"]) == len(p.averages.rows)
    assert {c.agreement for c in v.cells} | {c.agreement for c in v.claims} == {Agreement.NO_SCORE}
    printed = [
        *(r.value for r in p.averages.rows),
        *(x for r in p.scale for x in (r.difference, r.cohens_d) if x is not None),
        *(r.value for r in p.subsets),
        *(r.value for r in p.pools),
        *(x for r in p.depth_means for x in (r.middle_low, r.middle_high, r.ends)),
        *(x for r in p.interference for x in (*r.scores.values(), r.low, r.high, r.sd) if x is not None),
        *(x for r in p.interference_pairs for x in (r.low, r.high)),
    ]
    assert sorted(c.published for c in v.cells) == sorted(printed)
    assert v.table.state is Agreement.NO_SCORE


def test_interference_sd_from_the_papers_own_scores() -> None:
    """Ops-MM's printed scores 82.5 / 83.54 / 89.51 give a sample SD of 3.78; the paper prints 3.83."""
    p = paper(**{"Ops-MM-embedding-v1-7B": "ops"})
    ours = ModelInterference(model="ops", spread=spread({"text": 82.5, "mixed": 83.54, "image": 89.51}))
    loose = verdict(p, tolerance=0.1, interference={"ops": ours})
    assert cell(loose, "Ops-MM-embedding-v1-7B", "interference:sd").ours == pytest.approx(3.7829, abs=1e-4)
    assert cell(loose, "Ops-MM-embedding-v1-7B", "interference:sd").agreement is Agreement.REPRODUCED
    assert cell(loose, "Ops-MM-embedding-v1-7B", "interference:image").agreement is Agreement.REPRODUCED
    strict = verdict(p, tolerance=0.01, interference={"ops": ours})
    assert cell(strict, "Ops-MM-embedding-v1-7B", "interference:sd").agreement is Agreement.NOT_REPRODUCED
    assert strict.kinds["interference"].state is Agreement.NOT_REPRODUCED


def test_scale_difference_is_judged_in_points_against_its_interval() -> None:
    p = paper(**{"Qwen3-VL-Embedding-8B": "q8", "Qwen3-VL-Embedding-2B": "q2"})
    test = PairedTest(
        n=100,
        mean_difference=0.02,
        ci_low=-0.01,
        ci_high=0.05,
        t=1.0,
        p_value=0.3,
        cohens_d=0.1,
        resamples=100,
        confidence=0.95,
        seed=0,
    )
    found = ScaleComparison(
        family="qwen3", larger="q8", smaller="q2", larger_scale=8, smaller_scale=2, test=test
    )
    v = verdict(p, scale=[found])
    c = cell(v, "Qwen3-VL-Embedding-8B vs Qwen3-VL-Embedding-2B", "scale")
    assert (c.published, c.ours, c.ci_low, c.ci_high) == (0.33, 2.0, -1.0, 5.0)
    assert c.agreement is Agreement.CONSISTENT
    d = cell(v, "Qwen3-VL-Embedding-8B vs Qwen3-VL-Embedding-2B", "scale:d")
    assert (d.published, d.ours) == (0.007, 0.1) and d.agreement is Agreement.NOT_REPRODUCED  # 0.093 > 0.05
    claims = {c.claim: c for c in v.claims if c.kind == "scale"}
    # p 0.3 is on the paper's side of 0.05 (0.5375: not significant); |d| 0.1 is within the bound 0.113
    assert [c.holds for c in claims.values()] == [True, True]


def test_scale_pairs_the_largest_and_smallest_of_each_family() -> None:
    def model(name: str, family: str | None, scale: float | None) -> Bm25Model:
        return Bm25Model(name=name, kind="bm25", family=family, scale=scale)

    members = [
        ("a2", "a", 2),
        ("a8", "a", 8),
        ("a4", "a", 4),
        ("a?", "a", None),
        ("b", "b", 1),
        ("c", None, None),
    ]
    models = {name: model(name, family, scale) for name, family, scale in members}
    assert scale_pairs(models) == [("a", "a8", "a2")]
    with pytest.raises(ValueError, match="scale needs a family"):
        model("d", None, 3)


def test_shipped_paper_spec_loads_and_an_unknown_model_is_named(tmp_path: Path) -> None:
    specs = load_embed_specs(DEFAULT_SPECS)
    assert load_embed_paper(specs).averages.subsets == 14
    shutil.copytree(DEFAULT_SPECS, tmp_path / "specs")
    path = paper_path(tmp_path / "specs")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["averages"]["rows"][2]["model"] = "no-such-model"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(
        SpecError, match=r"paper\.yaml: averages\.rows\.2\.model: unknown model 'no-such-model'"
    ):
        load_embed_paper(load_embed_specs(tmp_path / "specs"))


def test_a_folder_without_paper_spec_overlays_the_shipped_embedders_runs_and_paper(tmp_path: Path) -> None:
    shipped = load_embed_specs(DEFAULT_SPECS)
    own = tmp_path / "specs" / "mmlongembed"
    (own / "models").mkdir(parents=True)
    (own / "runs").mkdir()
    (own / "models" / "bm25.yaml").write_text("name: bm25\nkind: bm25\nk1: 1.2\n", encoding="utf-8")
    (own / "models" / "my-bm25.yaml").write_text("name: my-bm25\nkind: bm25\n", encoding="utf-8")
    run = yaml.safe_load((DEFAULT_SPECS / "mmlongembed" / "runs" / "embed-smoke.yaml").read_text())
    (own / "runs" / "mine.yaml").write_text(
        yaml.safe_dump({**run, "name": "mine", "models": ["my-bm25", "all-minilm-l6-v2"]}), encoding="utf-8"
    )
    specs = load_embed_specs(tmp_path / "specs")
    assert set(specs.models) == set(shipped.models) | {"my-bm25"}
    assert set(specs.runs) == set(shipped.runs) | {"mine"}
    assert specs.models["bm25"].k1 == 1.2  # type: ignore[union-attr]
    assert load_embed_paper(specs) == load_embed_paper(shipped)


def test_aggregate_names_a_metrics_file_that_is_not_json(tmp_path: Path) -> None:
    metrics = tmp_path / "results" / "embed-smoke" / "metrics" / "all-minilm-l6-v2.json"
    metrics.parent.mkdir(parents=True)
    metrics.write_text("{not json", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "milebench",
            "--specs",
            str(DEFAULT_SPECS),
            "embed-aggregate",
            "--run",
            "embed-smoke",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert (
        f"ERROR milebench.benchmarks.mmlongembed.commands: {metrics.relative_to(tmp_path)}: " in done.stderr
    )
    assert not (tmp_path / "results" / "embed-smoke" / "analysis.json").exists()


def query(qid: str, family: str, length: int, interference: str) -> Query:
    return Query(
        id=qid,
        text=qid,
        subset=f"{family}/{interference}",
        bin=length,
        depth=0,
        needle_modality="text",
        interference=interference,
        family=family,
        entity=qid,
    )


def test_easy_and_hard_by_task_and_length_pool() -> None:
    queries = [
        query("vg", "band", 256, "text"),
        *(query(f"e{i}", "multi-source-reasoning", 8192, "easy") for i in range(4)),
        *(query(f"h{i}", "multi-source-reasoning", 8192, "hard") for i in range(2)),
        query("h16", "multi-source-reasoning", 16384, "hard"),
    ]
    scores = {q.id: {"P@1": float(q.id in ("e0", "e1", "e2", "h0"))} for q in queries}
    vg, real = split(queries)
    assert [q.id for q in vg] == ["vg"]
    rows = easy_hard("m", scores, real)
    assert [(r.bin, r.easy, r.hard, r.n_easy, r.n_hard) for r in rows] == [
        (8192, 75.0, 50.0, 4, 2),
        (16384, None, 0.0, 0, 1),
    ]


def test_family_and_scale_change_no_embedding_cache_key() -> None:
    plain = SentenceTransformersModel(
        name="m", kind="sentence-transformers", weights={"kind": "package", "package": "p"}, window=128
    )
    paired = plain.model_copy(update={"family": "f", "scale": 2.0})
    assert spec_hash(paired, exclude=LINEAGE) == spec_hash(plain, exclude=LINEAGE)
    assert spec_hash(paired) != spec_hash(plain)  # the run's own hash sees the pairing


PRINTED_VALUES = {5.72, 0.113, 25.42, 32.29, 75.83, 85.14, 61.94, 62.43, 53.7, 58.7, 90.6, 61.25, 23.44, 5.47}
"""Table 8's Ops-MM difference and d, Table 3's MMDocRAG Hard pair, Table 4's Doubao and Embed-RL pairs,
Table 9's Embed-RL-2B depth means, Table 16's Doubao and GME-2B cells."""


def test_the_papers_table_values_are_verdict_cells() -> None:
    v = verdict(paper())
    assert {c.published for c in v.cells} >= PRINTED_VALUES


def test_table_cells_hold_the_runs_subset_pool_depth_and_pair_numbers() -> None:
    from milebench.benchmarks.mmlongembed.analysis import DepthMeans, EasyHard

    p = paper(**{"Qwen3-VL-Embedding-8B": "q8", "Doubao-Seed-1.6": "db"})
    pools = [
        EasyHard(
            model="db", task="multi-source-reasoning", bin=8192, easy=60.0, hard=20.0, n_easy=4, n_hard=4
        )
    ]
    depths = {"embed-rl-2b": DepthMeans(model="embed-rl-2b", means={0: 90.0, 20: 55.0, 40: 53.0, 100: 91.0})}
    rl = {
        m: ModelInterference(model=m, spread=spread({"mixed": x, "text": 70.0}))
        for m, x in (("embed-rl-2b", 62.5), ("embed-rl-4b", 61.9))
    }
    ours = Ours({}, (), rl, {"q8": {"multi-source-reasoning/mmdocrag/hard": 25.0}}, pools, depths)
    v = build_verdict(p, ours, 0.5, 0.95, 100, 0)
    assert cell(v, "Qwen3-VL-Embedding-8B", "subset:multi-source-reasoning/mmdocrag/hard").ours == 25.0
    assert (
        cell(v, "Doubao-Seed-1.6", "pool:multi-source-reasoning/easy/8192").agreement
        is Agreement.NOT_REPRODUCED
    )
    assert cell(v, "Doubao-Seed-1.6", "pool:multi-source-reasoning/easy/32768").ours is None
    assert [cell(v, "Embed-RL-2B", f"depth:{k}").ours for k in ("middle-low", "middle-high", "ends")] == [
        53.0,
        55.0,
        90.5,
    ]
    pair = "Embed-RL-2B / Embed-RL-4B"
    assert (
        cell(v, pair, "interference:mixed-lower").ours,
        cell(v, pair, "interference:mixed-higher").ours,
    ) == (61.9, 62.5)
    assert cell(v, pair, "interference:mixed-higher").agreement is Agreement.REPRODUCED


def test_position_bounds_are_claims_checked_per_run_model() -> None:
    from milebench.benchmarks.mmlongembed.analysis import ModelPosition
    from milebench.benchmarks.mmlongembed.statistics import DepthEffects, WaldTest

    def effects(p: float) -> DepthEffects:
        return DepthEffects(
            n=10,
            groups=2,
            levels=(0, 50, 100),
            depth=WaldTest(chi2=30.0, df=2, p_value=p),
            quadratic=WaldTest(chi2=20.0, df=1, p_value=1e-6),
            converged=True,
        )

    positions = [
        ModelPosition(model="a", effects=effects(1e-5)),
        ModelPosition(model="b", effects=effects(0.2)),
    ]
    v = build_verdict(paper(), Ours({}, (), {}, position=positions), 0.5, 0.95, 100, 0)
    claims = {(c.subject, c.claim.split(":")[0]): c.holds for c in v.claims if c.kind == "position"}
    assert claims == {
        ("a", "depth (6 levels)"): True,
        ("b", "depth (6 levels)"): False,
        ("a", "quadratic depth"): True,
        ("b", "quadratic depth"): True,
    }
    assert v.table.state is Agreement.NOT_REPRODUCED
