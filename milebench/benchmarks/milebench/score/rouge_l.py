"""ROUGE-L F as the official evaluator computes it: the PyPI ``rouge`` 1.0.1 package, not ``rouge-score``."""

from __future__ import annotations

import logging

from rouge import Rouge

log = logging.getLogger(__name__)

# ROUGE-L alone: the package computes each metric independently, so its value equals that of Rouge().
_ROUGE = Rouge(metrics=["rouge-l"], stats=["f"])


def rouge_l_f(prediction: str, gold: str) -> float:
    """F of ROUGE-L between normalised texts; 0 for an empty prediction, as the evaluator scores it.

    A prediction made only of periods (possible when more than 32 remain after normalisation) has no
    sentence for the package, which raises; the official run would stop there. Such a prediction
    shares no word with any answer, so it scores 0 here and the sample is logged.
    """
    if not gold:
        raise ValueError("gold answer is empty after normalisation")
    if prediction == "":
        return 0.0
    if set(prediction) == {"."}:
        log.warning(
            "prediction of %d periods only: scored 0 (the official evaluator raises)", len(prediction)
        )
        return 0.0
    return float(_ROUGE.get_scores(prediction, gold)[0]["rouge-l"]["f"])
