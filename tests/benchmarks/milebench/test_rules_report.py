"""The best value of a section is judged on the printed numbers: values that print alike tie."""

from __future__ import annotations

from milebench.benchmarks.milebench.report.tables import best_columns


def test_values_equal_after_rounding_are_all_best() -> None:
    rows = [{"T-1": 61.84}, {"T-1": 61.76}, {"T-1": 61.74}, {"T-1": None}]
    # 61.84 and 61.76 both print as 61.8; 61.74 prints as 61.7.
    assert best_columns(rows, ["T-1"]) == [{"T-1"}, {"T-1"}, set(), set()]


def test_a_value_that_prints_higher_is_the_only_best() -> None:
    rows = [{"T-1": 61.86, "S-1": 10.0}, {"T-1": 61.84, "S-1": 10.04}]
    assert best_columns(rows, ["T-1", "S-1"]) == [{"T-1", "S-1"}, {"S-1"}]


def test_a_column_without_values_marks_nothing() -> None:
    assert best_columns([{"T-1": None}, {}], ["T-1"]) == [set(), set()]
