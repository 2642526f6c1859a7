"""A run's ``limit``: the same samples every time, in the task's proportions of image quantity levels, from
the run spec or the command line, and never held to the paper's numbers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from milebench import cli
from milebench.benchmarks.milebench.data.schema import Sample, TaskInstance
from milebench.benchmarks.milebench.preprocess.subset import quotas, subset
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import RunSpec, has_verdict
from milebench.spec.base import SpecError
from milebench.spec.run_limit import limit_runs
from milebench.spec.workflow_config import workflow_config

LEVELS = {"Few": 50, "Medium": 30, "Many": 20}


def samples() -> list[Sample]:
    levels = [level for level, n in LEVELS.items() for _ in range(n)]
    return [
        Sample(
            sample_id=i,
            task_instruction_id=0,
            task_instance=TaskInstance(context="<ImageHere>", images_path=[f"{i}.jpg"]),
            response="A",
            image_quantity_level=level,  # type: ignore[arg-type]
        )
        for i, level in enumerate(levels)
    ]


@pytest.fixture
def no_override() -> Iterator[None]:
    yield
    limit_runs(None)


def test_a_subset_is_stratified_by_image_quantity_and_the_same_every_time() -> None:
    every = samples()
    chosen = subset("WebQA", every, 10)
    assert Counter(s.image_quantity_level for s in chosen) == {"Few": 5, "Medium": 3, "Many": 2}
    assert chosen == subset("WebQA", list(reversed(every)), 10)[::-1]  # the ids, not the file order, decide
    assert [s.sample_id for s in chosen] == sorted(s.sample_id for s in chosen)  # kept in the file's order
    assert {s.sample_id for s in subset("ALFRED", every, 10)} != {s.sample_id for s in chosen}
    assert subset("WebQA", every, None) == every == subset("WebQA", every, len(every) + 1)


@pytest.mark.parametrize("limit", [1, 2, 7, 99])
def test_quotas_share_the_limit_in_proportion(limit: int) -> None:
    share = quotas(LEVELS, limit)
    assert sum(share.values()) == limit
    total = sum(LEVELS.values())
    assert all(abs(share[level] - limit * n / total) < 1 for level, n in LEVELS.items())


def test_a_subset_gets_no_verdict() -> None:
    paper = load_specs().run("paper")
    assert has_verdict(paper)
    assert not has_verdict(RunSpec.model_validate(paper.model_dump(mode="json") | {"limit": 5}))
    with pytest.raises(ValueError, match="limit"):
        RunSpec.model_validate(paper.model_dump(mode="json") | {"limit": 0})


@pytest.mark.usefixtures("no_override")
def test_the_command_line_limit_replaces_the_run_specs() -> None:
    assert workflow_config({"limit": 5}).limit == 5
    with pytest.raises(SpecError, match="limit"):
        workflow_config({"limit": 0})
    limit_runs(3)
    assert load_specs().run("smoke").limit == 3
    limit_runs(None)
    assert load_specs().run("smoke").limit is None


@pytest.mark.usefixtures("no_override")
def test_a_limit_below_one_is_an_argument_error(caplog: pytest.LogCaptureFixture) -> None:
    assert cli.main(["--limit", "0", "check-specs"]) == 2
    assert "argument --limit: must be 1 or more" in caplog.text
