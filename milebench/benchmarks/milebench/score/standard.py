"""The ``standard`` scorer: a conventional reading of each answer, to show how much of a score is the scorer.

It is a named variant beside the ``paper`` scorer, never the default, and differs on purpose:

- normalisation is uniform (Unicode NFKC, lower case, every punctuation mark a space, thousands commas
  removed, decimal points kept), with none of the official whole-text rules or the 32-period limit;
- an answer's option is read the way a person reads it: "The answer is B.", "Answer: (B)", "**B**",
  "B) text", "B. text", a bare "B", or the text of exactly one option; for options listed without
  letters (GPR1200) only the option text counts. Nothing is guessed: an empty or unreadable answer
  extracts nothing and scores 0 (the official evaluator guesses "C" for an empty one);
- ROUGE-L F comes from Google's ``rouge-score`` package (LCS over the whole text, no stemming), the
  metric most papers mean by ROUGE-L;
- needle and MMCoQA keep their official rules (whole word, substring) on the uniform normalisation.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING

from milebench.benchmarks.milebench.records import ScoredSample
from milebench.benchmarks.milebench.score.choice import option_key
from milebench.benchmarks.milebench.score.paper import ScoringError
from milebench.benchmarks.milebench.spec.task import ScorerKind, TaskSpec

if TYPE_CHECKING:
    from rouge_score.rouge_scorer import RougeScorer


@cache
def _rouge() -> RougeScorer:
    """Built on first use: rouge-score pulls in nltk, a second of import for every non-ROUGE job."""
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(["rougeL"], use_stemmer=False)


_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_NON_WORD = re.compile(r"[^\w.]|_|\.(?!\d)|(?<!\d)\.")
_SPACES = re.compile(r"\s+")

_LETTER_PATTERNS: tuple[re.Pattern[str], ...] = (
    # "The answer is B.", "Answer: (B)", "correct option is [B]"; upper case only, so that the article
    # in "the answer is a dog" is not read as option A
    re.compile(
        r"\b(?i:answer|option|choice)\s*(?:(?i:is)|:|-|=)?\s*(?:(?i:option)\s+)?\(?\[?([A-Z]{1,2})\]?\)?(?![A-Za-z])"
    ),
    # "**B**", "**(B)**", "**B.**"
    re.compile(r"\*\*\s*\(?([A-Za-z]{1,2})\)?[.:]?\s*\*\*"),
    # "B) text", "(B) text", "B. text", "B: text", and a bare "B" / "B." / "(B)"
    re.compile(r"^\s*\(?([A-Za-z]{1,2})(?:[).:]|\s*$)"),
)


def standard_normalize(text: str) -> str:
    """Uniform normalisation: NFKC, lower case, punctuation to spaces, numbers kept whole."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = _THOUSANDS.sub("", text)
    return _SPACES.sub(" ", _NON_WORD.sub(" ", text)).strip()


def _contains(haystack: str, needle: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", haystack) is not None


def _letter(answer: str, keys: set[str]) -> str | None:
    for pattern in _LETTER_PATTERNS:
        found = pattern.search(answer)
        if found and found.group(1).upper() in keys:
            return found.group(1).upper()
    return None


def _option_text(answer: str, options: Mapping[str, str]) -> str | None:
    """The key of the one option whose text the answer contains; longer texts shadow their parts."""
    normal = standard_normalize(answer)
    found = {key: text for key, text in options.items() if text and _contains(normal, text)}
    unique = [k for k, t in found.items() if not any(t != o and t in o for o in found.values())]
    return unique[0] if len(unique) == 1 else None


def extract_option(answer: str, choices: tuple[str, ...], labelled: bool) -> str | None:
    """The key the answer names, or None when it names none or several."""
    if not answer.strip():
        return None
    options = {option_key(i): standard_normalize(c) for i, c in enumerate(choices)}
    if labelled:
        letter = _letter(answer, set(options))
        if letter is not None:
            return letter
    return _option_text(answer, options)


def rouge_l(prediction: str, gold: str) -> float:
    """F of ROUGE-L from ``rouge-score`` (its own tokenizer); 0 for an empty prediction."""
    if not prediction.strip():
        return 0.0
    return float(_rouge().score(gold, prediction)["rougeL"].fmeasure)


def judge(task: TaskSpec, sample: ScoredSample, prediction: str) -> tuple[str | None, float]:
    """(extracted option key or None, score in [0, 1]) under the standard rules."""
    if task.scorer is ScorerKind.CHOICE:
        if not sample.choices:
            raise ScoringError(
                f"task {task.name} sample {sample.sample_id}: multi-choice sample has no choices"
            )
        gold_key = (
            option_key(sample.choices.index(sample.response)) if sample.response in sample.choices else None
        )
        if gold_key is None:
            raise ScoringError(
                f"task {task.name} sample {sample.sample_id}: gold answer {sample.response!r} is not one of "
                "its choices"
            )
        extracted = extract_option(prediction, sample.choices, sample.labelled_choices)
        return extracted, float(extracted == gold_key)
    if task.scorer is ScorerKind.ROUGE_L:
        return None, rouge_l(prediction, sample.response)
    gold, answer = standard_normalize(sample.response), standard_normalize(prediction)
    if task.scorer is ScorerKind.NEEDLE:
        return None, float(gold in answer.split())
    return None, float(gold in answer)
