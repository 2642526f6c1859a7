"""The MMLongEmbed report: metric tables (macro over subsets, micro over queries), the verdict against
the paper, the paper's analyses (model scale, position bias with Table 9's mean per depth, modality
interference with its classes, Easy vs Hard with an overall panel) as ``embed-aggregate`` computed them
and, per model, the length x depth Hit@k heatmap of every query (the paper's Figure 3 panel) and per
needle / haystack modality beside the share of needles that reached the model, in HTML and LaTeX; the
title names every task of the run.

Reuses the MileBench report's Jinja environment (filters, LaTeX escaping) and figure style.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from milebench.benchmarks.mmlongembed.aggregate import Analysis
from milebench.benchmarks.mmlongembed.analysis import Heatmap
from milebench.benchmarks.mmlongembed.evaluate import BREAKDOWN, SUBSET
from milebench.benchmarks.mmlongembed.metrics import TIES
from milebench.benchmarks.mmlongembed.paths import EmbedPaths
from milebench.benchmarks.mmlongembed.spec import EmbedRunSpec, EmbedSpecs
from milebench.benchmarks.mmlongembed.task_spec import TASK_NAMES
from milebench.benchmarks.mmlongembed.verdict import CLAIM_KINDS, KINDS
from milebench.io import atomic_write_bytes, atomic_write_text
from milebench.package_data import package_path
from milebench.report.figure import Figure
from milebench.report.plotting import STYLE, save_figure
from milebench.report.render import FIGURES, jinja_environment, tex_environment
from milebench.report.verdict_view import SummaryRow, VerdictRow, summary_row

log = logging.getLogger(__name__)

TEMPLATES = package_path("milebench.benchmarks.mmlongembed", "templates")


@dataclass(frozen=True)
class Table:
    title: str
    columns: list[str]
    rows: list[tuple[str, list[float | None]]]
    digits: int = 1


def _grid_panels(
    ax_row: Any, grids: dict[str, list[list[float | None]]], bins: list[int], depths: list[int]
) -> Any:
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#d9d9d9")
    image = None
    for ax, (subset, rows) in zip(ax_row, grids.items(), strict=True):
        data = np.array([[np.nan if v is None else 100 * v for v in row] for row in rows], dtype=float)
        image = ax.imshow(data, cmap=cmap, vmin=0, vmax=100, aspect="auto", interpolation="nearest")
        for (r, c), v in np.ndenumerate(data):
            if not np.isnan(v):
                ax.text(c, r, f"{v:.0f}", ha="center", va="center", fontsize=6)
        ax.set_xticks(range(len(bins)), [str(b) for b in bins], fontsize=6, rotation=45)
        ax.set_yticks(range(len(depths)), [f"{d}%" for d in depths], fontsize=6)
        ax.set_title(subset, fontsize=8)
    return image


def heatmap(model: str, metrics: dict[str, Any]) -> Figure:
    """Row 1: Hit@k per length bin (columns) and depth (rows), per subset; row 2: needles the model read."""
    hit, seen = metrics["heatmap"], metrics["needle_seen"]
    n = len(hit)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(2, n, figsize=(2.9 * n + 0.8, 5.4), layout="constrained", squeeze=False)
        image = _grid_panels(axes[0], hit, metrics["bins"], metrics["depths"])
        _grid_panels(axes[1], seen, metrics["bins"], metrics["depths"])
        axes[0][0].set_ylabel(f"{metrics['heatmap_metric']}\nneedle depth", fontsize=7)
        axes[1][0].set_ylabel("needle read whole\nneedle depth", fontsize=7)
        for ax in axes[1]:
            ax.set_xlabel("length bin (tokens)", fontsize=7)
        fig.colorbar(image, ax=axes, shrink=0.8, label="x100")
        return save_figure(
            fig,
            f"heatmap-{model}",
            f"{model}: {metrics['heatmap_metric']} by length and needle depth",
            f"Top: {metrics['heatmap_metric']} (x100) of the queries of each cell, per needle modality /"
            " haystack modality. Bottom: share of the cell's relevant candidates whose needle "
            "reached the model whole (text-only models drop images; windowed ones read head and tail only).",
        )


def overall_heatmap(h: Heatmap) -> Figure:
    """One panel per model, depths down and length bins across, every Visual Grounding query of the cell
    (the paper's Figure 3: 6 depths x 8 lengths at the paper's size)."""
    grids = {"all needles and haystacks": [[None if v is None else v / 100 for v in row] for row in h.grid]}
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 1, figsize=(0.45 * len(h.bins) + 2.4, 0.35 * len(h.depths) + 1.6),
                                 layout="constrained", squeeze=False)  # fmt: skip
        image = _grid_panels(axes[0], grids, list(h.bins), list(h.depths))
        axes[0][0].set_ylabel("needle depth", fontsize=7)
        axes[0][0].set_xlabel("length bin (tokens)", fontsize=7)
        fig.colorbar(image, ax=axes, shrink=0.8, label="x100")
        return save_figure(
            fig,
            f"length-depth-{h.model}",
            f"{h.model}: {h.metric} by length and needle depth, every Visual Grounding query",
            f"{h.metric} (x100) of every query of each length x depth cell ({len(h.depths)} depths x"
            f" {len(h.bins)} lengths), needle and haystack modalities together: the paper's Figure 3 panel.",
        )


def task_title(run: EmbedRunSpec) -> str:
    """Every task of the run, Visual Grounding first, in the spec's order."""
    names = ["Visual Grounding", *(TASK_NAMES[t.task] for t in run.real_tasks)]
    return ", ".join(dict.fromkeys(names))


def easy_hard_figure(analysis: Analysis) -> Figure | None:
    """The paper's Figure 4 layout: a panel per task and an overall one (every task together), its length
    pools along x, per model an Easy bar (solid) beside a Hard one (hatched); ``None`` for a run without
    real tasks."""
    rows = [*analysis.easy_hard, *analysis.easy_hard_overall]
    if not rows:
        return None
    tasks = [
        *sorted({r.task for r in analysis.easy_hard}),
        *sorted({r.task for r in analysis.easy_hard_overall}),
    ]
    models = list(dict.fromkeys(r.model for r in rows))
    colours = matplotlib.colormaps["tab10"]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            1, len(tasks), figsize=(4.2 * len(tasks), 3.2), layout="constrained", squeeze=False
        )
        width = 0.8 / (2 * len(models))
        for ax, task in zip(axes[0], tasks, strict=True):
            bins = sorted({r.bin for r in rows if r.task == task})
            for i, model in enumerate(models):
                found = {r.bin: r for r in rows if r.task == task and r.model == model}
                for j, kind in enumerate(("easy", "hard")):
                    values = [getattr(found[b], kind) if b in found else None for b in bins]
                    x = [k - 0.4 + width * (2 * i + j + 0.5) for k in range(len(bins))]
                    bars = ax.bar(
                        x,
                        [np.nan if v is None else v for v in values],
                        width,
                        color=colours(i),
                        hatch="//" if kind == "hard" else None,
                        edgecolor="black",
                        linewidth=0.4,
                        label=f"{model} ({kind.capitalize()})",
                    )
                    # Each bar carries its value, as the heatmaps' cells do: readable in print and in text.
                    ax.bar_label(bars, ["" if v is None else f"{v:.0f}" for v in values], fontsize=5)
            ax.set_xticks(range(len(bins)), [str(b) for b in bins], fontsize=7)
            ax.set_xlabel("length pool (tokens)", fontsize=7)
            ax.set_ylim(0, 100)
            ax.set_title(task, fontsize=8)
        axes[0][0].set_ylabel(f"{analysis.metric} (x100)", fontsize=7)
        axes[0][-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1))
        return save_figure(
            fig,
            "easy-hard",
            f"Easy vs Hard pools: {analysis.metric} by length pool",
            f"{analysis.metric} (x100) of each real task's Easy (solid) and Hard (hatched) queries per "
            "length pool, per model, each bar labelled with its value, and of every task's together (the "
            "last panel): the paper's Figure 4 layout. Hard pools hold altered copies of the positive (the "
            "task's construction); Easy pools hold other documents of the same length.",
        )


def _by(metrics: dict[str, dict[str, Any]], prefix: str, metric: str, title: str) -> Table | None:
    """``metric`` (x100) per subset or breakdown (``prefix``) and model; ``None`` where there is none."""
    keys = sorted({key for v in metrics.values() for key in v["averages"] if key.startswith(prefix)})
    if not keys:
        return None
    return Table(
        title,
        [k.removeprefix(prefix) for k in keys],
        [(m, [_x100(v["averages"].get(k, {}).get(metric)) for k in keys]) for m, v in metrics.items()],
    )


def tie_tables(metrics: dict[str, dict[str, Any]]) -> list[Table]:
    """The macro and micro P@1 under each tie rule, and the positives tied with another candidate."""
    rules = [r for r in TIES if all(r in v["tie_rules"] for v in metrics.values())]
    rule_table = Table(
        "P@1 under each tie rule, x100 (the run's rule gives every other number)",
        [f"{kind} P@1, {rule}" for kind in ("macro", "micro") for rule in rules],
        [
            (m, [_x100(v["tie_rules"][rule][kind]["P@1"]) for kind in ("macro", "micro") for rule in rules])
            for m, v in metrics.items()
        ],
        digits=2,
    )
    keys = sorted({k for v in metrics.values() for k in v["tied_positives"] if k.startswith(SUBSET)})
    sizes = {k: next(v["tied_positives"][k]["queries"] for v in metrics.values()) for k in keys}
    tied = Table(
        "Positives tied with another candidate, by subset (its queries in brackets)",
        [f"{k.removeprefix(SUBSET)} ({sizes[k]})" for k in keys],
        [(m, [v["tied_positives"].get(k, {}).get("tied") for k in keys]) for m, v in metrics.items()],
        digits=0,
    )
    return [rule_table, tied]


def tables(run: EmbedRunSpec, metrics: dict[str, dict[str, Any]]) -> list[Table]:
    k = max(run.cutoffs)
    columns = ["P@1", f"Hit@{run.heatmap_k}", f"Recall@{k}", f"MRR@{k}", f"nDCG@{k}"]
    out = [
        Table(
            f"{kind.capitalize()} average ({'over subsets' if kind == 'macro' else 'over queries'}), x100",
            columns,
            [(m, [_x100(v["averages"][kind][c]) for c in columns]) for m, v in metrics.items()],
        )
        for kind in ("macro", "micro")
    ]
    found = [
        *(
            _by(metrics, SUBSET, metric, f"{metric} by subset, x100")
            for metric in ("P@1", f"Hit@{run.heatmap_k}")
        ),
        _by(
            metrics,
            BREAKDOWN,
            "P@1",
            "P@1 by Visual Grounding needle / haystack modality, x100 (outside the macro average)",
        ),
    ]
    return [*out, *(t for t in found if t is not None), *tie_tables(metrics)]


def _x100(value: float | None) -> float | None:
    return None if value is None else 100 * value


def verdict_rows(analysis: Analysis) -> tuple[list[VerdictRow], list[SummaryRow]]:
    """MileBench's verdict view of every cell, and a summary per kind of number and overall."""
    verdict = analysis.verdict
    rows = [VerdictRow(cell=c, display_name=c.model, footnote=None) for c in verdict.cells]
    summary = [summary_row(key, header, verdict.kinds[key]) for key, header in KINDS.items()]
    claims = [
        summary_row(f"claims-{key}", f"Checked claims: {header}", verdict.claim_kinds[key])
        for key, header in CLAIM_KINDS.items()
        if key in verdict.claim_kinds
    ]
    return rows, [*summary, *claims, summary_row("table", "All published values", verdict.table)]


def write_report(
    run: EmbedRunSpec,
    specs: EmbedSpecs,
    metrics: dict[str, dict[str, Any]],
    analysis: Analysis,
    paths: EmbedPaths,
) -> None:
    figures = [heatmap(model, m) for model, m in metrics.items()]
    overall = [overall_heatmap(h) for h in analysis.heatmaps if h.grid]
    pools = easy_hard_figure(analysis)
    rows, summary = verdict_rows(analysis)
    context = {
        "run": run,
        "models": [specs.models[m] for m in metrics],
        "tables": tables(run, metrics),
        "figures": figures,
        "overall_heatmaps": overall,
        "task_title": task_title(run),
        "easy_hard": pools,
        "analysis": analysis,
        "verdict_rows": rows,
        "verdict_summary": summary,
    }
    for figure in [*figures, *overall, *([pools] if pools else [])]:
        atomic_write_bytes(paths.report_figures / f"{figure.key}.png", figure.png)
        atomic_write_bytes(paths.report_figures / f"{figure.key}.pdf", figure.pdf)
    html = jinja_environment(True, TEMPLATES).get_template("report.html.j2").render(**context)
    tex_env = tex_environment(TEMPLATES)
    tex = tex_env.get_template("report.tex.j2").render(figures_dir=FIGURES, **context)
    atomic_write_text(paths.report_html, html)
    atomic_write_text(paths.report_tex, tex)
    log.info("report -> %s, %s", paths.report_html, paths.report_tex)
