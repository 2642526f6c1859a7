"""Our numbers beside the MMLongEmbed paper's, each cell judged by MileBench's verdict rules.

The states and their rules are ``milebench.score.verdict``'s: ``reproduced`` within the run's
tolerance (points), ``consistent`` when outside it but the published value lies in our bootstrap
interval (widened by the printed rounding), ``not reproduced`` otherwise, ``no score`` where the run
has no number of ours (a model outside the run, or an average over fewer subsets than the paper's).
Every published value is a cell, so the report shows all of them. Cells: average P@1 per model; the
scale test's difference per family; each interference score (or the lowest and highest, where the
paper prints a range) and the SD.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from milebench.benchmarks.mmlongembed.analysis import ModelInterference, ScaleComparison
from milebench.benchmarks.mmlongembed.paper import EmbedPaper
from milebench.score.verdict import (
    AgreementSummary,
    VerdictCell,
    agreement,
    in_interval,
    summarise_agreement,
    within,
)
from milebench.spec.base import Spec

AVERAGE, SCALE, INTERFERENCE = "average", "scale", "interference"
KINDS = {AVERAGE: "Average P@1", SCALE: "Model scale", INTERFERENCE: "Modality interference"}


class OurAverage(Spec):
    """A run model's macro P@1 (x100), the subsets behind it and its bootstrap interval."""

    value: float
    subsets: int
    ci_low: float | None
    ci_high: float | None


class EmbedVerdict(Spec):
    tolerance: float
    confidence: float
    resamples: int
    seed: int
    cells: tuple[VerdictCell, ...]
    kinds: dict[str, AgreementSummary]
    table: AgreementSummary


def judged(
    model: str,
    column: str,
    header: str,
    published: float,
    ours: float | None,
    tolerance: float,
    interval: tuple[float | None, float | None] = (None, None),
    coverage: float | None = None,
) -> VerdictCell:
    """One published value beside ours, in the state MileBench's rules give it."""
    low, high = interval if ours is not None else (None, None)
    difference = None if ours is None else ours - published
    inside = in_interval(published, low, high)
    return VerdictCell(
        model=model,
        column=column,
        header=header,
        published=published,
        ours=ours,
        difference=difference,
        ci_low=low,
        ci_high=high,
        published_in_interval=inside,
        coverage=coverage,
        passed=None if difference is None else within(difference, tolerance),
        flagged=False,
        agreement=agreement(ours, published, inside, tolerance),
    )


def _interference_cells(
    row_model: str, printed: dict[str, float], low: float | None, high: float | None, sd: float,
    ours: ModelInterference | None, tolerance: float,
) -> list[VerdictCell]:  # fmt: skip
    scores = ours.spread.scores if ours is not None else {}
    values: list[tuple[str, str, float, float | None]] = [
        (f"{INTERFERENCE}:{m}", f"P@1, {m} haystacks", v, scores.get(m)) for m, v in printed.items()
    ]
    if low is not None:
        values.append(
            (f"{INTERFERENCE}:lowest", "P@1, lowest modality", low, min(scores.values(), default=None))
        )
    if high is not None:
        values.append(
            (f"{INTERFERENCE}:highest", "P@1, highest modality", high, max(scores.values(), default=None))
        )
    values.append((f"{INTERFERENCE}:sd", "SD over modalities", sd, ours.spread.sd if ours else None))
    return [judged(row_model, column, header, p, o, tolerance) for column, header, p, o in values]


def build_verdict(
    paper: EmbedPaper,
    averages: Mapping[str, OurAverage],
    scale: Sequence[ScaleComparison],
    interference: Mapping[str, ModelInterference],
    tolerance: float,
    confidence: float,
    resamples: int,
    seed: int,
) -> EmbedVerdict:
    """Every published value of ``paper``; ours where the run has the model (by the kit's name)."""
    cells: list[VerdictCell] = []
    for row in paper.averages.rows:
        ours = averages.get(row.model) if row.model is not None else None
        full = ours is not None and ours.subsets == paper.averages.subsets
        cells.append(
            judged(
                row.paper_name,
                AVERAGE,
                KINDS[AVERAGE],
                row.value,
                ours.value if ours is not None and full else None,
                tolerance,
                (ours.ci_low, ours.ci_high) if ours is not None else (None, None),
                ours.subsets / paper.averages.subsets if ours is not None else None,
            )
        )
    kit = {row.paper_name: row.model for row in paper.averages.rows if row.model is not None}
    for published in paper.scale:
        pair = (kit.get(published.larger), kit.get(published.smaller))
        found = next((c for c in scale if (c.larger, c.smaller) == pair), None)
        test = found.test if found is not None else None
        cells.append(
            judged(
                f"{published.larger} vs {published.smaller}",
                SCALE,
                "P@1 difference (larger - smaller)",
                published.difference,
                100 * test.mean_difference if test is not None else None,
                tolerance,
                (
                    None if test is None or test.ci_low is None else 100 * test.ci_low,
                    None if test is None or test.ci_high is None else 100 * test.ci_high,
                ),
            )
        )
    for irow in paper.interference:
        printed = {m.value: v for m, v in irow.scores.items()}
        ours_i = interference.get(irow.model) if irow.model is not None else None
        cells += _interference_cells(
            irow.paper_name, printed, irow.low, irow.high, irow.sd, ours_i, tolerance
        )
    return EmbedVerdict(
        tolerance=tolerance,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        cells=tuple(cells),
        kinds={
            k: summarise_agreement(c.agreement for c in cells if c.column.split(":")[0] == k) for k in KINDS
        },
        table=summarise_agreement(c.agreement for c in cells),
    )
