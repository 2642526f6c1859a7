"""A rendered figure: PNG for the HTML report, PDF for LaTeX. Its own module, so the report's tables
name the type without importing the plotting code, which imports them."""

from __future__ import annotations

import base64
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    key: str
    """File stem of the PNG and PDF written beside the LaTeX report."""
    title: str
    caption: str
    png: bytes
    pdf: bytes

    @property
    def png_base64(self) -> str:
        return base64.b64encode(self.png).decode("ascii")
