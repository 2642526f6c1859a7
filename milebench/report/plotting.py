"""Every report's figures drawn alike: matplotlib's Agg backend, to PNG (embedded in the HTML) and PDF
(beside the LaTeX). The output is byte-for-byte repeatable: no timestamps or software versions in the
files, fixed fonts and sizes, and math parsing off so a model name with ``$`` or ``_`` is drawn as written.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure as MplFigure

from milebench.report.figure import Figure

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

STYLE: dict[RcKeyType, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "text.parse_math": False,
    "svg.hashsalt": "milebench",
    "figure.dpi": 100,
}
PNG_META = {"Software": None}
PDF_META = {"Creator": None, "Producer": None, "CreationDate": None, "ModDate": None}


def save_figure(fig: MplFigure, key: str, title: str, caption: str) -> Figure:
    png, pdf = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=110, metadata=PNG_META)
    fig.savefig(pdf, format="pdf", metadata=PDF_META)
    plt.close(fig)
    return Figure(key, title, caption, png.getvalue(), pdf.getvalue())
