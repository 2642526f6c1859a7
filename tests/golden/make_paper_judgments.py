"""Record the official evaluator's judgments of adversarial answers as golden data for the paper scorer.

A developer runs it against a checkout of the official MileBench code; the test suite only reads the
JSONL it writes (``paper_judgments.jsonl``):

    python tests/golden/make_paper_judgments.py /path/to/MileBench [--out tests/golden/paper_judgments.jsonl]

Cases are generated deterministically. Each is judged by the official ``Eval`` methods through the same
dispatch as the official ``main`` (task name, then question type), one sample per call, so the recorded
score is that sample's own score (ROUGE-L unrounded) and the level is the one the evaluator assigns.
``evaluate.py`` imports scikit-learn without using it for scoring; when it is absent, a stand-in module
is registered so the file can be imported.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import io
import json
import logging
import random
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("make_paper_judgments")

SEED = 20240429
IMAGE_COUNTS = (2, 3, 5, 6, 7, 15, 31, 32, 33, 64, 109)
DEFAULT_OUT = Path(__file__).with_name("paper_judgments.jsonl")

CHOICE_SETS: dict[str, list[str]] = {
    "plain": ["apple", "banana", "cherry pie", "date"],
    "substrings": ["red", "red apple", "apple", "reddish apple"],
    "metachars": ["$5", "5*3", "a+b", "why?", "(x)", "[y]", "c++", "x^2", "a|b", "3.5"],
    "spaced-metachars": ["cost $ 5", "5 * 3", "a | b", "x ^ 2"],
    "thousands": ["1,000", "2,500", "10,000", "1000"],
    "periods": ["Mr. Smith.", "Dr. Who", "U.S.A.", "e.g. this one"],
    "many-periods": ["a" + ". a" * 40, "b" + ". b" * 40, "wait....", "end."],
    "unicode": ["café", "naïve", "日本語", "Straße", "İstanbul", "ÅNGSTRÖM"],
    "sentences": [
        "The man picks up the cup.",
        "The man puts down the cup.",
        "The woman opens the door.",
        "The woman closes the door.",
    ],
    "quotes": ["'quoted'", '"double"', "it's", "rock 'n' roll"],
    "letters": ["A", "B", "C", "D"],
    "yes-no": ["yes", "no"],
    "empty-option": ["?", "yes", "no", "maybe"],
    "hyphens": ["left-to-right", "right-to-left", "top-down", "bottom up"],
    "counts": ["3 apples", "13 apples", "30 apples", "3"],
    "tabs-newlines": ["line\none", "tab\tseparated", "plain", "two  spaces"],
}
WORDS = [
    "dog",
    "cat",
    "car",
    "tree",
    "house",
    "river",
    "boat",
    "plane",
    "chair",
    "table",
    "lamp",
    "cup",
    "door",
    "window",
    "road",
    "bridge",
    "tower",
    "clock",
    "phone",
    "book",
    "pen",
    "flower",
    "bird",
    "horse",
    "train",
    "bus",
    "sign",
    "shoe",
    "hat",
    "ball",
    "kite",
    "mountain",
    "beach",
]
FUZZ_ATOMS = (
    " ",
    "  ",
    "\n",
    "\t",
    ".",
    "..",
    ".5",
    ",",
    "1,000",
    "3,5",
    "?",
    "!",
    "(",
    ")",
    "[",
    "]",
    "'",
    '"',
    "-",
    "_",
    "$",
    "*",
    "+",
    "|",
    "^",
    "é",
    "ß",
    "日本",
    "İ",
    "answer",
    "option",
    "is",
    "the",
)
NEEDLES = ("74836", "q7x9", "apple", "1,000", "New-York", "3.14", "hello.", "Blue Whale", "x_y")
SUBSTRING_GOLDS = ("paris", "New York City", "1,200", "Dr. Who", "the red one", "yes")
ROUGE_GOLDS = (
    "the car in the left image is missing.",
    "A man walks to the table, picks up the red cup and puts it in the sink.",
    "Change the color of the sky to orange; increase the contrast.",
    "the small gray cube moved to the right of the large cylinder",
    "1,000 people, 2.5 km. done",
)


def load_official(checkout: Path) -> Any:
    """Import the official ``evaluate.py`` as a module (never copied into this repository)."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        text = types.ModuleType("sklearn.feature_extraction.text")
        text.TfidfVectorizer = None  # type: ignore[attr-defined]
        pairwise = types.ModuleType("sklearn.metrics.pairwise")
        pairwise.cosine_similarity = None  # type: ignore[attr-defined]
        for name in ("sklearn", "sklearn.feature_extraction", "sklearn.metrics"):
            sys.modules[name] = types.ModuleType(name)
        sys.modules[text.__name__] = text
        sys.modules[pairwise.__name__] = pairwise
    spec = importlib.util.spec_from_file_location("official_evaluate", checkout / "evaluate.py")
    if spec is None or spec.loader is None:
        raise FileNotFoundError(checkout / "evaluate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def key_of(index: int) -> str:
    """Key of an option as a model might write it: A..Z, then two letters (AA, ..., BZ, CA, ...)."""
    if index < 26:
        return chr(65 + index)
    return chr(64 + index // 26) + chr(65 + index % 26)


def choice_templates(key: str, text: str) -> list[str]:
    """Ways a model answers a multiple-choice question, for one option."""
    return [
        key,
        key.lower(),
        f"{key}.",
        f"({key})",
        f"{key})",
        f"{key}. {text}",
        f"{key} {text}",
        f"({key}) {text}",
        f"{key}: {text}",
        text,
        text.upper(),
        text.replace(" ", ""),
        f"The answer is {key}.",
        f"The answer is {text}.",
        f"Answer: {key}",
        f"I choose option {key} because {text} fits best.",
        f"{text}\n{key}",
        f"Not {key}.",
        f"{key}, {text}!",
        f'"{text}"',
    ]


GENERIC_PREDICTIONS = (
    "",
    " ",
    "\n\t ",
    ".",
    "....",
    "." * 40,
    "AAA",
    "AB",
    "ab",
    "BA",
    "I don't know.",
    "None of the above",
    "1,000",
    "Option A or option B",
    "答案是 B",
    "(A) (B) (C)",
)


def large_choice_set(rng: random.Random, n: int) -> list[str]:
    """Unlabelled options in the manner of GPR1200 (more than 26), with distinct texts."""
    picked: list[str] = []
    while len(picked) < n:
        text = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {len(picked)}"
        if rng.random() < 0.2:
            text = text.replace(" ", "_")
        picked.append(text)
    return picked


def fuzz(rng: random.Random, pool: list[str]) -> str:
    """A random answer made of option texts, keys, punctuation and unicode."""
    parts = [
        rng.choice(pool) if rng.random() < 0.5 else rng.choice(FUZZ_ATOMS) for _ in range(rng.randint(1, 7))
    ]
    return rng.choice(["", " ", ", ", "\n"]).join(parts)


def long_text(rng: random.Random, tail: str) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(600)) + " " + tail


def choice_cases(rng: random.Random) -> Iterator[dict[str, Any]]:
    sets = dict(CHOICE_SETS)
    for n in (30, 60, 85):
        sets[f"large-{n}"] = large_choice_set(rng, n)
    for name, choices in sets.items():
        task = "GPR1200" if name.startswith("large") else "ActionSequence"
        indices = sorted({0, 1, len(choices) - 1, 26 % len(choices), 52 % len(choices), 79 % len(choices)})
        predictions: list[str] = list(GENERIC_PREDICTIONS)
        for i in indices:
            predictions += choice_templates(key_of(i), choices[i])
        pool = choices + [key_of(i) for i in range(len(choices))]
        predictions += [fuzz(rng, pool) for _ in range(40)]
        predictions.append(long_text(rng, f"So the answer is {key_of(indices[-1])}. {choices[indices[-1]]}"))
        for j, prediction in enumerate(predictions):
            gold = choices[indices[j % len(indices)]]
            yield {
                "task": task,
                "question_type": "multi-choice",
                "choices": choices,
                "gold": gold,
                "prediction": prediction,
            }


def needle_cases(rng: random.Random) -> Iterator[dict[str, Any]]:
    for task in ("TextNeedleInAHaystack", "ImageNeedleInAHaystack"):
        for gold in NEEDLES:
            predictions = [
                gold,
                f"The needle is {gold}.",
                f"({gold})",
                f"{gold}{gold}",
                f"x{gold}",
                gold.upper(),
                f"the answer: {gold}, ok",
                "",
                "   ",
                gold.replace("-", " "),
                "..." + gold,
                "." * 40 + gold,
                f"{gold}.{gold}",
                f"1,000 {gold}",
                f"'{gold}'",
                long_text(rng, gold),
                fuzz(rng, [gold, *NEEDLES]),
                fuzz(rng, [gold, *NEEDLES]),
            ]
            for prediction in predictions:
                yield {
                    "task": task,
                    "question_type": "open-ended",
                    "choices": None,
                    "gold": gold,
                    "prediction": prediction,
                }


def substring_cases(rng: random.Random) -> Iterator[dict[str, Any]]:
    for gold in SUBSTRING_GOLDS:
        predictions = [
            gold,
            f"I think {gold} is right",
            gold.upper(),
            gold.replace(" ", ""),
            gold[: len(gold) // 2],
            "",
            f"({gold}).",
            f"{gold}, 2,000 more",
            "." * 40 + gold,
            fuzz(rng, [gold, *SUBSTRING_GOLDS]),
            fuzz(rng, [gold, *SUBSTRING_GOLDS]),
        ]
        for prediction in predictions:
            yield {
                "task": "MMCoQA",
                "question_type": "open-ended",
                "choices": None,
                "gold": gold,
                "prediction": prediction,
            }


def rouge_cases(rng: random.Random) -> Iterator[dict[str, Any]]:
    tasks = ("Spot-the-Diff", "CLEVR-Change", "IEdit", "ALFRED")
    for k, gold in enumerate(ROUGE_GOLDS):
        words = gold.split()
        predictions = [
            gold,
            gold.upper(),
            " ".join(reversed(words)),
            " ".join(words[: len(words) // 2]),
            " ".join(words + words),
            "",
            " ",
            "." * 40,
            "." * 33,
            "." * 32,
            ". . .",
            gold + "." * 40,
            "." * 40 + gold,
            gold.replace(" ", ". "),
            f"1,000 {gold}",
            f"{gold} (see image #2!)",
            "completely unrelated words here",
            long_text(rng, gold),
            "日本語 café " + gold,
            fuzz(rng, [*words, *ROUGE_GOLDS]),
            fuzz(rng, [*words, *ROUGE_GOLDS]),
            fuzz(rng, [*words, *ROUGE_GOLDS]),
        ]
        for prediction in predictions:
            yield {
                "task": tasks[k % len(tasks)],
                "question_type": "open-ended",
                "choices": None,
                "gold": gold,
                "prediction": prediction,
            }


def official_judgment(evaluator: Any, case: dict[str, Any]) -> dict[str, Any]:
    """Judge one case through the official dispatch and methods; an exception is recorded, not raised."""
    instance: dict[str, Any] = {"images_path": [f"{i}.jpg" for i in range(case["n_images"])]}
    if case["choices"] is not None:
        instance["choice_list"] = copy.deepcopy(case["choices"])
    core = {
        "meta_data": {"question_type": case["question_type"]},
        "data": [{"sample_id": 0, "task_instance": instance, "image_quantity_level": "Few"}],
    }
    preds = [{"sample_id": 0, "gt_response": case["gold"], "pred_response": case["prediction"]}]
    task = case["task"]
    scorer = evaluator.Eval()
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            if "NeedleInAHaystack" in task or "MMCoQA" in task:
                result, _ = scorer.evaluate_needle(preds, core, needle="NeedleInAHaystack" in task)
                score, extracted = result["Accuracy"], None
            elif case["question_type"] == "open-ended":
                result, _ = scorer.evaluate_rouge(preds, core)
                score, extracted = result["Rouge-L f"], None
            else:
                judged, result, _ = scorer.evaluate_multichoice(preds, core)
                score, extracted = judged[0]["result"], judged[0]["extracted"]
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"}
    level = next(k for k, (_, n) in result["image_quantity_level-Result"].items() if n == 1)
    out = {"extracted": extracted, "score": float(score), "level": level}
    if printed.getvalue():
        out["printed"] = printed.getvalue().strip()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="Folder holding the official evaluate.py.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    evaluator = load_official(args.checkout)
    rng = random.Random(SEED)
    cases = [*choice_cases(rng), *needle_cases(rng), *substring_cases(rng), *rouge_cases(rng)]
    lines = []
    for i, case in enumerate(cases):
        case = {"id": i, **case, "n_images": IMAGE_COUNTS[i % len(IMAGE_COUNTS)]}
        case["official"] = official_judgment(evaluator, case)
        lines.append(json.dumps(case, ensure_ascii=False) + "\n")
    args.out.write_text("".join(lines), encoding="utf-8")
    log.info("wrote %d cases to %s", len(lines), args.out)


if __name__ == "__main__":
    main()
