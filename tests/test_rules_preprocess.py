"""Prompt rules stated as facts: tiling that divides evenly, the range of image references, the budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_prompt import build_one, sample_json, task_spec

from milebench.preprocess import combine
from milebench.preprocess.prompt import PreprocessError


@pytest.mark.parametrize(
    ("n_images", "n_pictures", "sizes"),
    [(6, 3, [2, 2, 2]), (8, 2, [4, 4]), (4, 4, [1, 1, 1, 1]), (9, 1, [9])],
)
def test_images_that_divide_evenly_fill_every_picture_alike(
    n_images: int, n_pictures: int, sizes: list[int]
) -> None:
    """``(n - 1) // N + 1`` images per picture: exactly n / N when N divides n, so N pictures."""
    groups = combine.groups(n_images, n_pictures)
    assert [len(g) for g in groups] == sizes
    assert [i for g in groups for i in g] == list(range(n_images))


def test_pictures_are_labelled_with_global_image_numbers(tmp_path: Path) -> None:
    paths = [tmp_path / f"{i}.png" for i in range(6)]
    jobs = combine.sample_jobs(paths, [f"{i}" * 64 for i in range(6)], 3)
    assert [(job.paths, job.first_index) for job in jobs] == [
        (tuple(paths[0:2]), 0),
        (tuple(paths[2:4]), 2),
        (tuple(paths[4:6]), 4),
    ]
    assert [job.sha256 for job in jobs][1] == ("2" * 64, "3" * 64)


# --- image references ----------------------------------------------------------------------------------


@pytest.mark.parametrize("reference", ["{image#0}", "{table#0}", "{image#3}"])
def test_a_reference_outside_1_to_n_is_refused(tmp_path: Path, reference: str) -> None:
    """The official loop replaces ``{image#i}`` for i = 1..n only, so ``{image#0}`` and ``{image#n+1}`` would
    stay in the prompt as text: the kit refuses such a sample (naming it) instead of sending that."""
    sample = sample_json(f"{{image#1}}{reference} What?", ["a.png", "b.png"], ["cat"])
    with pytest.raises(PreprocessError) as err:
        build_one(tmp_path, task_spec(), sample)
    assert str(err.value).endswith(
        f"WebQA.json: task WebQA, sample 7: context refers to {reference} but the sample has 2 image(s)"
    )


def test_references_1_to_n_become_placeholders(tmp_path: Path) -> None:
    sample = sample_json("{image#1} and {table#2}: which?", ["a.png", "b.png"], ["cat"])
    prepared = build_one(tmp_path, task_spec(), sample)
    assert prepared.context.startswith("<ImageHere> and <ImageHere>: which?")
