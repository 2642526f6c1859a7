"""The paper's analyses as figures: accuracy by image count, needle heatmaps, multi vs combined image.

Drawn in the kit's repeatable style and saved as PNG and PDF (:mod:`milebench.report.plotting`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from milebench.benchmarks.milebench.report.evidence import Evidence
from milebench.benchmarks.milebench.report.needle import (
    DEPTH_RULES,
    IMAGE_NEEDLE,
    LENGTH_LABELS,
    N_DEPTHS,
    TEXT_NEEDLE,
    NeedleGrid,
    needle_grids,
)
from milebench.benchmarks.milebench.report.tables import ModeTables, QuantityRow, Report
from milebench.benchmarks.milebench.score.aggregate import LEVELS, OVERALL_DIAG, OVERALL_REAL
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import Group, TaskSpec
from milebench.report.figure import Figure
from milebench.report.plotting import STYLE, save_figure
from milebench.spec.model import ModelSpec

if TYPE_CHECKING:
    pass


def quantity_figure(rows: Sequence[QuantityRow]) -> Figure | None:
    """Accuracy per image-quantity level per model: ours solid, the paper's plot values dashed."""
    drawn = [r for r in rows if any(v is not None for v in r.ours.values())]
    if not drawn:
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.0, 4.2), layout="constrained")
        x = np.arange(len(LEVELS))
        for i, row in enumerate(drawn):
            colour = f"C{i % 10}"
            ours = [np.nan if (value := row.ours[level]) is None else value for level in LEVELS]
            ax.plot(x, ours, marker="o", color=colour, label=row.display_name)
            if row.paper is not None:
                paper = [row.paper[level] for level in LEVELS]
                ax.plot(
                    x, paper, marker="x", linestyle="--", color=colour, label=f"{row.display_name} (paper)"
                )
        ax.set_xticks(
            x, [f"{level}\n({span})" for level, span in zip(LEVELS, ("2-5", "6-31", "32-109"), strict=True)]
        )
        ax.set_xlabel("images per sample")
        ax.set_ylabel("score (x100)")
        ax.set_ylim(0, 100)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        return save_figure(
            fig,
            "image-quantity",
            "Performance by number of images",
            "Mean score per image-quantity level over all samples of all tasks (multi-image mode); dashed: "
            "the paper's values, read off its plot (about \u00b11 point).",
        )


def needle_figure(group: Group, task: str, grids: Sequence[NeedleGrid]) -> Figure | None:
    """One heatmap per model: needle depth (rows) x context length (columns), mean score per cell."""
    if not grids:
        return None
    cols = min(3, len(grids))
    rows = math.ceil(len(grids) / cols)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            rows, cols, figsize=(3.4 * cols + 0.8, 2.6 * rows + 0.4), layout="constrained", squeeze=False
        )
        cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#d9d9d9")
        image = None
        for ax, grid in zip(axes.flat, grids, strict=False):
            data = np.array([[np.nan if v is None else v for v in row] for row in grid.scores], dtype=float)
            image = ax.imshow(
                data, cmap=cmap, vmin=0, vmax=100, aspect="auto", origin="upper", interpolation="nearest"
            )
            ax.set_title(f"{grid.display_name} (n={grid.n_samples})", fontsize=8)
            step = max(1, len(grid.lengths) // 8)
            ticks = list(range(0, len(grid.lengths), step))
            ax.set_xticks(ticks, [grid.lengths[t] for t in ticks], fontsize=6, rotation=45)
            ax.set_yticks(range(N_DEPTHS), [f"{10 * d}%" for d in range(N_DEPTHS)], fontsize=6)
            ax.set_xlabel(LENGTH_LABELS[group], fontsize=7)
            ax.set_ylabel("needle depth", fontsize=7)
        for ax in list(axes.flat)[len(grids) :]:
            ax.set_visible(False)
        if image is not None:
            fig.colorbar(image, ax=axes, shrink=0.8, label="score (x100)")
        return save_figure(
            fig,
            f"needle-{group.value}",
            f"{group.value} {task}: score by context length and needle depth",
            f"Multi-image mode, paper scorer; grey: no sample. The data has no length or depth field: "
            f"{LENGTH_LABELS[group]}; {DEPTH_RULES[group]}; 10 depth bins.",
        )


def modes_figure(multi: ModeTables, combined: ModeTables) -> Figure | None:
    """Overall Real. and Overall Diag. of each model in multi-image and combined-image mode."""
    ours = {
        m.mode.value: {row.model: row for section in m.sections for row in section.rows}
        for m in (multi, combined)
    }
    models = [row for section in multi.sections for row in section.rows]
    if not models:
        return None
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            1, 2, figsize=(8.0, 0.35 * len(models) + 1.4), layout="constrained", sharey=True
        )
        y = np.arange(len(models))
        for ax, (column, header) in zip(
            axes, ((OVERALL_REAL, "Overall Real."), (OVERALL_DIAG, "Overall Diag.")), strict=True
        ):
            for offset, mode, colour in ((-0.2, multi.mode.value, "C0"), (0.2, combined.mode.value, "C1")):
                values = [ours[mode][r.model].ours[column] for r in models]
                ax.barh(
                    y + offset,
                    [np.nan if v is None else v for v in values],
                    height=0.38,
                    color=colour,
                    label=mode,
                )
            ax.set_title(header)
            ax.set_xlim(0, 100)
            ax.grid(axis="x", alpha=0.3)
        axes[0].set_yticks(y, [r.display_name for r in models])
        axes[0].invert_yaxis()
        axes[1].legend(loc="lower right", fontsize=7)
        return save_figure(
            fig,
            "multi-vs-combined",
            "Multi-image vs combined-image",
            "Overall scores per model with all images interleaved (multi-image) and tiled into one picture "
            "(combined-image); a missing bar: the model's overall score is incomplete in that mode.",
        )


def report_figures(
    report: Report, models: Sequence[ModelSpec], tasks: Sequence[TaskSpec], evidence: Evidence
) -> list[Figure]:
    """Every figure the run's scores allow, in the report's order."""
    figures = []
    if report.image_quantity is not None:
        figures.append(quantity_figure(report.image_quantity))
    if Mode.MULTI_IMAGE in report.run.modes:
        for group in (TEXT_NEEDLE, IMAGE_NEEDLE):
            for task in (t for t in tasks if t.group is group):
                figures.append(needle_figure(group, task.display_name, needle_grids(task, models, evidence)))
    by_mode = {m.mode: m for m in report.modes}
    if Mode.MULTI_IMAGE in by_mode and Mode.COMBINED_IMAGE in by_mode:
        figures.append(modes_figure(by_mode[Mode.MULTI_IMAGE], by_mode[Mode.COMBINED_IMAGE]))
    return [f for f in figures if f is not None]
