"""One cell's samples joined: what was asked, what was answered and how it was judged, one record a line.

The score stage writes it from what it already holds (the prepared samples, the predictions and the
judgments it has just made), so every value is a copy of one of those three files, never computed again:
the per-sample log lmms-eval's ``--log_samples`` gives, read with ``milebench show``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from milebench.benchmarks.milebench.data.schema import QuantityLevel
from milebench.benchmarks.milebench.records import Judgment, JudgmentStatus, PreparedSample, ScoredSample
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.infer.records import FailureKind, Prediction
from milebench.io import atomic_write_jsonl
from milebench.score.registry import DEFAULT_SCORER
from milebench.spec.base import Spec


class Judged(Spec):
    """What one scorer made of the answer."""

    extracted: str | None
    score: float | None


class SampleLog(Spec):
    """One sample of a cell: its prompt and images (prepared samples), its answer and failure
    (predictions), its gold, extracted answer and score (judgments, the default scorer's first)."""

    task: str
    mode: Mode
    model: str
    sample_id: int
    prompt: str | None = Field(description="The prompt as built; null: judged against the task JSON alone.")
    images: tuple[str, ...] | None = Field(description="Image paths under MileBench/; null as for prompt.")
    choices: tuple[str, ...] | None
    gold: str
    answer: str | None = Field(description="The model's answer; null when missing or failed.")
    status: JudgmentStatus
    failure: FailureKind | None
    failure_detail: str | None
    scorer: str
    extracted: str | None
    score: float | None
    variants: dict[str, Judged] = Field(description="The other scorers' judgments, by scorer.")
    image_quantity_level: QuantityLevel

    @property
    def correct(self) -> bool:
        """Full marks under the default scorer (1 for a right choice; a ROUGE-L of 1)."""
        return self.score == 1.0


def join(
    samples: Sequence[ScoredSample], preds: dict[int, Prediction], judgments: Sequence[Judgment]
) -> list[SampleLog]:
    """One record per sample, in the samples' order: exactly the samples the judgments were made for."""
    by_scorer: dict[str, dict[int, Judgment]] = {}
    for judgment in judgments:
        by_scorer.setdefault(judgment.scorer, {})[judgment.sample_id] = judgment
    rows = []
    for sample in samples:
        judged = by_scorer[DEFAULT_SCORER][sample.sample_id]
        pred = preds.get(sample.sample_id)
        prompt, images = (
            (sample.prompt, sample.images) if isinstance(sample, PreparedSample) else (None, None)
        )
        rows.append(
            SampleLog(
                task=judged.task,
                mode=judged.mode,
                model=judged.model,
                sample_id=sample.sample_id,
                prompt=prompt,
                images=images,
                choices=sample.choices,
                gold=sample.response,
                answer=None if pred is None or judged.status != "scored" else pred.response,
                status=judged.status,
                failure=judged.failure,
                failure_detail=None if pred is None else pred.failure_detail,
                scorer=DEFAULT_SCORER,
                extracted=judged.extracted,
                score=judged.score,
                variants={
                    scorer: Judged(
                        extracted=other[sample.sample_id].extracted, score=other[sample.sample_id].score
                    )
                    for scorer, other in by_scorer.items()
                    if scorer != DEFAULT_SCORER
                },
                image_quantity_level=judged.image_quantity_level,
            )
        )
    return rows


def write_sample_log(
    path: Path, samples: Sequence[ScoredSample], preds: dict[int, Prediction], judgments: Sequence[Judgment]
) -> None:
    atomic_write_jsonl(path, [row.model_dump(mode="json") for row in join(samples, preds, judgments)])
