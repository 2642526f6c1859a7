"""Aggregation follows the paper: task means x100, evaluator levels, group means and the two overalls."""

from __future__ import annotations

from pathlib import Path

import pytest

from milebench.benchmarks.milebench.paper import PaperSpec
from milebench.benchmarks.milebench.records import Judgment
from milebench.benchmarks.milebench.score.aggregate import (
    DIAGNOSTIC_GROUPS,
    OVERALL_DIAG,
    OVERALL_REAL,
    REALISTIC_GROUPS,
    Denominator,
    LevelScore,
    TaskScore,
    column_tasks,
    coverage,
    group_scores,
    overall_diag,
    overall_real,
    pooled_levels,
    summarise,
)
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.samples import expected_samples, warn_if_short
from milebench.benchmarks.milebench.spec.task import (
    GROUP_CATEGORY,
    Group,
    Metric,
    QuestionType,
    ScorerKind,
    TaskSpec,
)
from milebench.spec.base import load_spec
from milebench.spec.folder import DEFAULT_SPECS

PAPER_YAML = DEFAULT_SPECS / "paper.yaml"


def judgment(sample_id: int, status: str, score: float | None, level: str = "Few") -> Judgment:
    return Judgment(
        task="ActionSequence",
        mode=Mode.MULTI_IMAGE,
        model="m",
        sample_id=sample_id,
        scorer="paper",
        status=status,
        score=score,
        image_quantity_level=level,
    )


def task(name: str, group: Group) -> TaskSpec:
    return TaskSpec(
        name=name,
        display_name=name,
        group=group,
        group_name="g",
        category=GROUP_CATEGORY[group],
        question_type=QuestionType.MULTI_CHOICE,
        metric=Metric.ACCURACY,
        scorer=ScorerKind.CHOICE,
        n_samples=1,
        has_adversarial=True,
        source_dataset="s",
    )


def test_a_failed_sample_lowers_the_paper_score_the_scored_only_variant_does_not() -> None:
    """The official evaluator divides by every sample: 3 correct of 4 expected, one failed, is 75.0."""
    judgments = [judgment(i, "scored", 1.0) for i in range(3)] + [judgment(3, "failed", None)]
    result = summarise("ActionSequence", "m", Mode.MULTI_IMAGE, "paper", judgments)
    assert result.denominator is Denominator.EXPECTED
    assert result.score == pytest.approx(75.0)
    assert result.scored_only == pytest.approx(100.0)
    assert (result.n, result.n_scored, result.n_failed) == (4, 3, 1)
    few = result.levels["Few"]
    assert (few.score, few.n, few.n_scored) == (75.0, 4, 3)


def test_task_and_level_scores_divide_by_every_expected_sample() -> None:
    judgments = [
        judgment(0, "scored", 1.0, "Few"),
        judgment(1, "scored", 0.0, "Few"),
        judgment(2, "scored", 0.5, "Many"),
        judgment(3, "failed", None, "Many"),
        judgment(4, "missing", None, "Medium"),
    ]
    result = summarise("ActionSequence", "m", Mode.MULTI_IMAGE, "paper", judgments)
    assert result.score == pytest.approx(30.0)  # (1 + 0 + 0.5 + 0 + 0) / 5
    assert result.scored_only == pytest.approx(50.0)  # (1 + 0 + 0.5) / 3
    assert (result.n, result.n_scored, result.n_missing, result.n_failed) == (5, 3, 1, 1)
    assert (result.levels["Few"].score, result.levels["Few"].n, result.levels["Few"].n_scored) == (50.0, 2, 2)
    assert result.levels["Many"].score == pytest.approx(25.0)
    assert (result.levels["Medium"].score, result.levels["Medium"].n, result.levels["Medium"].n_scored) == (
        0.0,
        1,
        0,
    )


def test_task_with_nothing_scored_scores_zero_and_has_no_scored_only_mean() -> None:
    result = summarise("ActionSequence", "m", Mode.MULTI_IMAGE, "paper", [judgment(0, "failed", None)])
    assert (result.score, result.scored_only, result.n_failed) == (0.0, None, 1)
    assert summarise("ActionSequence", "m", Mode.MULTI_IMAGE, "paper", []).score is None


def test_group_is_the_mean_of_its_tasks_and_needs_all_of_them() -> None:
    tasks = [task("A", Group.T1), task("B", Group.T1), task("C", Group.T2)]
    groups = group_scores({"A": 40.0, "B": 60.0}, tasks)
    assert groups[Group.T1] == pytest.approx(50.0)
    assert groups[Group.T2] is None
    assert groups[Group.S1] is None


def test_overalls_are_plain_means_of_their_groups() -> None:
    groups = {g: float(i) for i, g in enumerate(Group)}
    assert REALISTIC_GROUPS == (
        Group.T1,
        Group.T2,
        Group.T3,
        Group.T4,
        Group.S1,
        Group.S2,
        Group.S3,
        Group.S4,
        Group.S5,
    )
    assert DIAGNOSTIC_GROUPS == (Group.N1, Group.N2, Group.I1)
    assert overall_real(groups) == pytest.approx(4.0)
    assert overall_diag(groups) == pytest.approx(10.0)
    assert overall_diag({**groups, Group.I1: None}) is None


def test_coverage_counts_missing_files_and_samples() -> None:
    def score(n: int, scored: int, missing: int, failed: int) -> TaskScore:
        return TaskScore(
            task="t", model="m", mode=Mode.MULTI_IMAGE, scorer="paper", denominator=Denominator.EXPECTED,
            score=1.0, scored_only=1.0, n=n, n_scored=scored, n_missing=missing, n_failed=failed, levels={},
        )  # fmt: skip

    cov = coverage([(score(10, 7, 2, 1), 10), (None, 5), (score(5, 5, 0, 0), 5)])
    assert (cov.tasks_expected, cov.tasks_missing) == (3, 1)
    assert (cov.samples_expected, cov.samples_scored, cov.samples_missing, cov.samples_failed) == (
        20,
        12,
        2,
        1,
    )
    assert cov.fraction == pytest.approx(0.6)  # the missing task's 5 expected samples count
    assert not cov.complete
    assert coverage([(score(5, 5, 0, 0), 5)]).complete


def test_coverage_counts_the_specs_samples_of_missing_and_short_tasks() -> None:
    """6 of 29 tasks scored is not 100%, and a 3-sample file of a 200-sample task is not complete."""
    full = TaskScore(
        task="t", model="m", mode=Mode.MULTI_IMAGE, scorer="paper", denominator=Denominator.EXPECTED,
        score=1.0, scored_only=1.0, n=200, n_scored=200, n_missing=0, n_failed=0, levels={},
    )  # fmt: skip
    six = coverage([(full, 200)] * 6 + [(None, 200)] * 23)
    assert six.fraction == pytest.approx(6 / 29) and not six.complete
    short = full.model_copy(update={"n": 3, "n_scored": 3})
    assert coverage([(short, 200)]).fraction == pytest.approx(3 / 200)
    assert not coverage([(short, 200)]).complete


@pytest.fixture(scope="module")
def paper() -> PaperSpec:
    return load_spec(PAPER_YAML, PaperSpec)


def test_rules_reproduce_the_printed_overalls_except_listed_inconsistencies(paper: PaperSpec) -> None:
    listed = {(i.model, i.column): i for i in paper.main_table.inconsistencies}
    checked = 0
    for row in paper.main_table.rows:
        computed = {"overall_real": overall_real(row.groups), "overall_diag": overall_diag(row.groups)}
        printed = {"overall_real": row.overall_real, "overall_diag": row.overall_diag}
        for column, value in computed.items():
            assert value is not None
            item = listed.get((row.model, column))
            if item is None:
                # Printed to one decimal: a consistent value is within half a unit of the last digit.
                assert abs(value - printed[column]) <= 0.05 + 1e-9, (row.model, column, value)
                checked += 1
            else:
                assert value == pytest.approx(item.computed, abs=0.005), (row.model, column)
                assert abs(value - printed[column]) > 0.05, (row.model, column)
    assert checked >= 2 * len(paper.main_table.rows) - 6


def test_levels_pool_every_expected_sample_of_a_model_across_tasks() -> None:
    def scored(few: tuple[float, int], many: tuple[float, int]) -> TaskScore:
        return TaskScore(
            task="t", model="m", mode=Mode.MULTI_IMAGE, scorer="paper", denominator=Denominator.EXPECTED,
            score=1.0, scored_only=1.0, n=10, n_scored=10, n_missing=0, n_failed=0,
            levels={"Few": LevelScore(score=few[0], n=few[1], n_scored=few[1]),
                    "Medium": LevelScore(score=None, n=0, n_scored=0),
                    "Many": LevelScore(score=many[0], n=many[1], n_scored=many[1])},
        )  # fmt: skip

    pooled = pooled_levels([scored((100.0, 1), (50.0, 4)), scored((0.0, 3), (100.0, 4))])
    assert pooled["Few"].score == pytest.approx(25.0)  # 1 of 4 samples, not the mean of 100 and 0
    assert (pooled["Few"].n, pooled["Few"].n_scored) == (4, 4)
    assert pooled["Many"].score == pytest.approx(75.0)
    assert pooled["Medium"].score is None


def test_column_tasks_follow_the_paper_columns() -> None:
    tasks = [task("A", Group.T1), task("B", Group.S3), task("C", Group.N1), task("D", Group.I1)]
    assert [t.name for t in column_tasks("T-1", tasks)] == ["A"]
    assert [t.name for t in column_tasks(OVERALL_REAL, tasks)] == ["A", "B"]
    assert [t.name for t in column_tasks(OVERALL_DIAG, tasks)] == ["C", "D"]
    assert [t.name for t in column_tasks("B", tasks)] == ["B"]


def test_contamination_regular_is_the_main_table_overall_real(paper: PaperSpec) -> None:
    """The paper's contamination table compares Overall Real., which the adversarial delta reproduces."""
    main = {row.model: row for row in paper.main_table.rows}
    assert paper.contamination.rows
    for row in paper.contamination.rows:
        assert row.regular == main[row.model].overall_real
        assert row.delta == pytest.approx(row.regular - row.adv, abs=1e-9)


def test_each_task_expects_its_specs_count_a_fixtures_own_and_at_most_the_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    specs = load_specs()
    paper, smoke = specs.run("paper"), specs.run("smoke")
    task = specs.tasks["ALFRED"]
    assert expected_samples(task, paper) == task.n_samples
    assert expected_samples(task, smoke) == smoke.data.samples_per_task  # type: ignore[union-attr]
    limited = paper.model_copy(update={"limit": 5})
    assert expected_samples(task, limited) == min(5, task.n_samples)
    warn_if_short(task, paper, 3, Path("ALFRED.json"))
    assert f"ALFRED.json: 3 samples, the task spec says {task.n_samples}" in caplog.text
    caplog.clear()
    warn_if_short(task, smoke, smoke.data.samples_per_task, Path("ALFRED.json"))  # type: ignore[union-attr]
    assert not caplog.text
