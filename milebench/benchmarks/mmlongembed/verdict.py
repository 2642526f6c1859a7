"""Our numbers beside the MMLongEmbed paper's, each cell judged by the kit's one verdict rule.

The states and their rules are ``milebench.verdict``'s: ``reproduced`` within the run's
tolerance (points), ``consistent`` when outside it but the published value lies in our bootstrap
interval (widened by the printed rounding), ``not reproduced`` otherwise, ``no score`` where the run
has no number of ours (a model outside the run, or an average over fewer subsets than the paper's).
Every published value is a cell, so the report shows all of them. Cells: average P@1 per model; the
scale test's difference and Cohen's d per family (d judged within ``D_TOLERANCE``); a model's P@1 on
one subset (Table 3) and on a task's Easy or Hard pools of one length (Table 16); the range of the
middle depth levels and the ends (Table 9); each interference score (or the lowest and highest, where
the paper prints a range or two models' scores without saying whose) and the SD.

What the paper prints as a bound or a significance is a checked claim: it holds or not on our numbers
(the scale test's p on the same side of 0.05 as the paper's, every family's d within the paper's
bound, each position-bias test's p below the paper's bound for every model of the run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from milebench.benchmarks.mmlongembed.analysis import (
    DepthMeans,
    EasyHard,
    ModelInterference,
    ModelPosition,
    ScaleComparison,
)
from milebench.benchmarks.mmlongembed.paper import EmbedPaper, kit_names
from milebench.spec.base import Spec
from milebench.verdict import Agreement, AgreementSummary, VerdictCell, judged, summarise_agreement

AVERAGE, SCALE, SUBSET, POOL, DEPTH, INTERFERENCE = (
    "average", "scale", "subset", "pool", "depth", "interference",
)  # fmt: skip
POSITION = "position"
KINDS = {
    AVERAGE: "Average P@1",
    SCALE: "Model scale",
    SUBSET: "P@1 by subset",
    POOL: "P@1 by task pool and length",
    DEPTH: "P@1 by needle depth",
    INTERFERENCE: "Modality interference",
}
CLAIM_KINDS = {SCALE: "Model scale", POSITION: "Position bias"}
D_TOLERANCE = 0.05
"""Cohen's d within which ours reproduces a printed d (a quarter of Cohen's 'small' effect, 0.2)."""
SIGNIFICANCE = 0.05


class OurAverage(Spec):
    """A run model's macro P@1 (x100), the subsets behind it and its bootstrap interval."""

    value: float
    subsets: int
    ci_low: float | None
    ci_high: float | None


class CheckedClaim(Spec):
    """A bound or significance the paper prints, checked on our number: ``holds`` None without one."""

    kind: str
    subject: str
    claim: str
    published: float
    ours: float | None
    holds: bool | None
    agreement: Agreement


class EmbedVerdict(Spec):
    tolerance: float
    confidence: float
    resamples: int
    seed: int
    cells: tuple[VerdictCell, ...]
    claims: tuple[CheckedClaim, ...]
    kinds: dict[str, AgreementSummary]
    claim_kinds: dict[str, AgreementSummary]
    table: AgreementSummary


def checked(
    kind: str, subject: str, claim: str, published: float, ours: float | None, holds: bool | None
) -> CheckedClaim:
    state = (
        Agreement.NO_SCORE if holds is None else Agreement.REPRODUCED if holds else Agreement.NOT_REPRODUCED
    )
    return CheckedClaim(
        kind=kind, subject=subject, claim=claim, published=published, ours=ours, holds=holds, agreement=state
    )


def _interference_cells(
    row_model: str, printed: dict[str, float], low: float | None, high: float | None, sd: float | None,
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
    if sd is not None:
        values.append((f"{INTERFERENCE}:sd", "SD over modalities", sd, ours.spread.sd if ours else None))
    return [judged(row_model, column, header, p, o, tolerance) for column, header, p, o in values]


@dataclass(frozen=True)
class Ours:
    """The run's numbers a verdict reads, by the kit's model name (scores x100)."""

    averages: Mapping[str, OurAverage]
    scale: Sequence[ScaleComparison]
    interference: Mapping[str, ModelInterference]
    subsets: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    pools: Sequence[EasyHard] = ()
    depths: Mapping[str, DepthMeans] = field(default_factory=dict)
    position: Sequence[ModelPosition] = ()


def _average_cells(paper: EmbedPaper, ours: Ours, tolerance: float) -> list[VerdictCell]:
    cells = []
    for row in paper.averages.rows:
        mine = ours.averages.get(row.model) if row.model is not None else None
        full = mine is not None and mine.subsets == paper.averages.subsets
        cells.append(
            judged(
                row.paper_name,
                AVERAGE,
                KINDS[AVERAGE],
                row.value,
                mine.value if mine is not None and full else None,
                tolerance,
                (mine.ci_low, mine.ci_high) if mine is not None else (None, None),
                mine.subsets / paper.averages.subsets if mine is not None else None,
            )
        )
    return cells


def _scale(paper: EmbedPaper, ours: Ours, tolerance: float) -> tuple[list[VerdictCell], list[CheckedClaim]]:
    kit = kit_names(paper)
    cells, claims = [], []
    for published in paper.scale:
        pair = (kit.get(published.larger), kit.get(published.smaller))
        found = next((c for c in ours.scale if (c.larger, c.smaller) == pair), None)
        test = found.test if found is not None else None
        name = f"{published.larger} vs {published.smaller}"
        cells.append(
            judged(
                name,
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
        if published.cohens_d is not None:
            d = test.cohens_d if test is not None else None
            cells.append(judged(name, f"{SCALE}:d", "Cohen's d", published.cohens_d, d, D_TOLERANCE))
        if published.p_value is not None:
            p = test.p_value if test is not None else None
            side = published.p_value < SIGNIFICANCE
            claims.append(
                checked(
                    SCALE,
                    name,
                    f"p = {published.p_value:g}: {'' if side else 'not '}significant at {SIGNIFICANCE:g}"
                    " (ours on the same side)",
                    published.p_value,
                    p,
                    None if p is None else (p < SIGNIFICANCE) == side,
                )
            )
    bound = paper.scale_d_at_most
    if bound is not None:
        tested: list[tuple[ScaleComparison | None, float | None]] = [(c, c.test.cohens_d) for c in ours.scale]
        for c, d in tested or [(None, None)]:
            subject = "every family of the run" if c is None else f"{c.larger} vs {c.smaller}"
            claims.append(
                checked(
                    SCALE,
                    subject,
                    f"|Cohen's d| <= {bound:g} (every family)",
                    bound,
                    d,
                    None if d is None else abs(d) <= bound,
                )
            )
    return cells, claims


def _position_claims(paper: EmbedPaper, ours: Ours) -> list[CheckedClaim]:
    claims = []
    for row in paper.position:
        models: list[ModelPosition | None] = [*ours.position] or [None]
        for m in models:
            test = None if m is None else getattr(m.effects, row.test)
            p = None if test is None else test.p_value
            claims.append(
                checked(
                    POSITION,
                    "every model of the run" if m is None else m.model,
                    f"{row.term}: Wald chi2({row.df}) p < {row.p_below:g}",
                    row.p_below,
                    p,
                    None if p is None else p < row.p_below,
                )
            )
    return claims


def _table_cells(paper: EmbedPaper, ours: Ours, tolerance: float) -> list[VerdictCell]:
    """Table 3's subset cells, Table 16's pool cells and Table 9's depth cells."""
    kit = kit_names(paper)
    cells = []
    for s in paper.subsets:
        mine = ours.subsets.get(kit.get(s.paper_name, ""), {}).get(s.subset)
        cells.append(
            judged(
                s.paper_name, f"{SUBSET}:{s.subset}", f"P@1, {s.subset} ({s.table})", s.value, mine, tolerance
            )
        )
    for r in paper.pools:
        row = next(
            (e for e in ours.pools if (e.model, e.task, e.bin) == (kit.get(r.paper_name), r.task, r.bin)),
            None,
        )
        mine = None if row is None else getattr(row, r.difficulty)
        where = f"{r.task} {r.difficulty.capitalize()}, {r.bin}"
        cells.append(
            judged(
                r.paper_name,
                f"{POOL}:{r.task}/{r.difficulty}/{r.bin}",
                f"P@1, {where} ({r.table})",
                r.value,
                mine,
                tolerance,
            )
        )
    for d in paper.depth_means:
        means = ours.depths.get(kit.get(d.paper_name, ""))
        levels = list(means.means.values()) if means is not None else []
        middle = levels[1:-1]
        values = (
            ("middle-low", "lowest middle depth", d.middle_low, min(middle) if middle else None),
            ("middle-high", "highest middle depth", d.middle_high, max(middle) if middle else None),
            (
                "ends",
                "mean of the first and last depths",
                d.ends,
                (levels[0] + levels[-1]) / 2 if len(levels) > 1 else None,
            ),
        )
        cells += [
            judged(d.paper_name, f"{DEPTH}:{k}", f"P@1, {h} ({d.table})", p, o, tolerance)
            for k, h, p, o in values
        ]
    return cells


def _pair_cells(paper: EmbedPaper, ours: Ours, tolerance: float) -> list[VerdictCell]:
    kit = kit_names(paper)
    cells = []
    for pair in paper.interference_pairs:
        found = [ours.interference.get(kit.get(n, "")) for n in pair.paper_names]
        scores = [f.spread.scores.get(pair.modality.value) for f in found if f is not None]
        both = sorted(s for s in scores if s is not None) if len(scores) == 2 else []
        name = " / ".join(pair.paper_names)
        for column, header, published, mine in (
            ("lower", "lower of the two", pair.low, both[0] if both else None),
            ("higher", "higher of the two", pair.high, both[-1] if both else None),
        ):
            cells.append(
                judged(
                    name,
                    f"{INTERFERENCE}:{pair.modality.value}-{column}",
                    f"P@1, {pair.modality.value} haystacks, {header} ({pair.table})",
                    published,
                    mine,
                    tolerance,
                )
            )
    return cells


def build_verdict(
    paper: EmbedPaper, ours: Ours, tolerance: float, confidence: float, resamples: int, seed: int
) -> EmbedVerdict:
    """Every published value of ``paper``; ours where the run has the model (by the kit's name)."""
    scale_cells, scale_claims = _scale(paper, ours, tolerance)
    cells = [*_average_cells(paper, ours, tolerance), *scale_cells, *_table_cells(paper, ours, tolerance)]
    for irow in paper.interference:
        printed = {m.value: v for m, v in irow.scores.items()}
        mine = ours.interference.get(irow.model) if irow.model is not None else None
        cells += _interference_cells(irow.paper_name, printed, irow.low, irow.high, irow.sd, mine, tolerance)
    cells += _pair_cells(paper, ours, tolerance)
    claims = [*scale_claims, *_position_claims(paper, ours)]
    kinds = {k: summarise_agreement(c.agreement for c in cells if c.column.split(":")[0] == k) for k in KINDS}
    return EmbedVerdict(
        tolerance=tolerance,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        cells=tuple(cells),
        claims=tuple(claims),
        kinds=kinds,
        claim_kinds={k: summarise_agreement(c.agreement for c in claims if c.kind == k) for k in CLAIM_KINDS},
        table=summarise_agreement([*(c.agreement for c in cells), *(c.agreement for c in claims)]),
    )
