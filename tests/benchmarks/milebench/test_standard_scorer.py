"""The ``standard`` scorer reads answers as a person would, and is a named variant beside ``paper``."""

from __future__ import annotations

import pytest
from mini_specs import MINI_TASKS

from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.score import paper, standard
from milebench.benchmarks.milebench.score.standard import extract_option, rouge_l, standard_normalize
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import QuestionType, ScorerKind
from milebench.score.registry import DEFAULT_SCORER, BadScorer, scorer, scorer_names

TASKS = {t.name: t for t in MINI_TASKS}
CHOICES = ("apple pie", "banana", "cherry", "date", "banana split")


def prepared(
    task: str, gold: str, choices: tuple[str, ...] | None = None, labelled: bool = True
) -> PreparedSample:
    return PreparedSample(
        task=task, mode=Mode.MULTI_IMAGE, sample_id=0, instruction="i", context="c", images=("x.jpg",),
        image_sha256=("a" * 64,), prompt_sha256="b" * 64,
        question_type=QuestionType.MULTI_CHOICE if choices else QuestionType.OPEN_ENDED,
        choices=choices, labelled_choices=labelled, response=gold, image_quantity_level="Few", n_images=1,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "key"),
    [
        ("The answer is B.", "B"),
        ("Answer: (B)", "B"),
        ("answer: [C]", "C"),
        ("**B**", "B"),
        ("**(D)**", "D"),
        ("B) banana", "B"),
        ("(B) banana", "B"),
        ("B. banana", "B"),
        ("B", "B"),
        ("b", "B"),
        ("The correct option is D", "D"),
        ("I think it is cherry.", "C"),
        ("Banana split, clearly", "E"),
        ("The answer is a banana", "B"),
        ("", None),
        ("   ", None),
        ("A and B", None),
        ("banana or cherry", None),
        ("Answer: F", None),
        ("I cannot tell.", None),
    ],
)
def test_extracts_the_option_a_reader_would(answer: str, key: str | None) -> None:
    assert extract_option(answer, CHOICES, labelled=True) == key


def test_unlabelled_options_are_read_by_text_only() -> None:
    assert extract_option("B", CHOICES, labelled=False) is None
    assert extract_option("It is the cherry", CHOICES, labelled=False) == "C"


def test_empty_answer_is_wrong_under_standard_but_c_under_paper() -> None:
    task = TASKS["ActionSequence"]
    sample = prepared("ActionSequence", "cherry", CHOICES)
    assert paper.judge(task, sample, "") == ("C", 1.0)
    assert standard.judge(task, sample, "") == (None, 0.0)
    assert standard.judge(task, sample, "The answer is C.") == ("C", 1.0)
    assert paper.judge(task, sample, "The answer is C.")[1] == 0.0


def test_normalisation_is_uniform_and_keeps_numbers() -> None:
    assert standard_normalize("Hello, World!  1,000 cars; 3.5 km.") == "hello world 1000 cars 3.5 km"
    assert standard_normalize("\uff21\uff22\uff23") == "abc"  # full-width letters


def test_rouge_l_is_rouge_score_f() -> None:
    assert rouge_l("The car is gone.", "the car is gone") == pytest.approx(1.0)
    # LCS "the car" over 3 and 4 tokens: P = 2/3, R = 2/4, F = 4/7.
    assert rouge_l("the car left", "the car is gone") == pytest.approx(4 / 7)
    assert rouge_l("", "the car") == 0.0
    task = TASKS["Spot-the-Diff"]
    assert standard.judge(task, prepared("Spot-the-Diff", "the car is gone"), "the car left") == (
        None,
        pytest.approx(4 / 7),
    )


def test_needle_and_substring_keep_their_rules() -> None:
    needle = TASKS["TextNeedleInAHaystack"]
    assert standard.judge(needle, prepared(needle.name, "42"), "The number is 42.")[1] == 1.0
    assert standard.judge(needle, prepared(needle.name, "42"), "The number is 421.")[1] == 0.0
    coqa = TASKS["MMCoQA"]
    assert standard.judge(coqa, prepared(coqa.name, "New York"), "It was in new york city")[1] == 1.0


def test_gold_outside_the_choices_is_an_error_naming_the_sample() -> None:
    with pytest.raises(paper.ScoringError, match="ActionSequence sample 0"):
        standard.judge(TASKS["ActionSequence"], prepared("ActionSequence", "kiwi", CHOICES), "A")


def test_registry_names_both_scorers_with_paper_the_default() -> None:
    assert DEFAULT_SCORER == "paper"
    assert scorer_names() == ("paper", "standard")
    assert scorer("standard") is standard.judge
    assert TASKS["ActionSequence"].scorer is ScorerKind.CHOICE
    with pytest.raises(BadScorer, match="unknown scorer 'x'; known: paper, standard"):
        scorer("x")
