"""The Jinja environment every benchmark's report renders in: the kit's filters, HTML autoescaped, LaTeX
escaped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypedDict, Unpack

import jinja2

DIGITS = 1
"""Decimals the tables print; best values are compared after rounding to them, as a reader sees them."""
FIGURES = "figures"
"""Folder beside ``report.tex`` holding each figure as PDF (included by the LaTeX) and PNG."""

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}
_LATEX_PATTERN = re.compile("|".join(re.escape(c) for c in _LATEX_SPECIAL))


def latex_escape(value: object) -> str:
    """Escape a data string for LaTeX text mode, in one pass so inserted backslashes stay intact."""
    return _LATEX_PATTERN.sub(lambda m: _LATEX_SPECIAL[m.group(0)], str(value))


def percent(value: float | None, missing: str = "\u2013") -> str:
    """A share in [0, 1] as a percentage with one decimal."""
    return missing if value is None else f"{100 * value:.1f}%"


def latex_breakable(value: object, chunk: int = 16) -> str:
    """Escape for LaTeX and let long unbroken runs (checksums, paths, URLs) break across lines."""
    words = re.split(r"(\s+)", str(value))
    return "".join(
        r"\allowbreak{}".join(latex_escape(w[i : i + chunk]) for i in range(0, len(w), chunk))
        if len(w) > chunk
        else latex_escape(w)
        for w in words
    )


def number(value: float | None, missing: str = "\u2013", digits: int = DIGITS) -> str:
    """A table number as the paper prints it: one decimal."""
    return missing if value is None else f"{value:.{digits}f}"


def signed(value: float | None, missing: str = "\u2013", digits: int = 2) -> str:
    """A difference with its sign, so a reader sees the direction at a glance."""
    return missing if value is None else f"{value:+.{digits}f}"


class Delimiters(TypedDict, total=False):
    """The template syntax a format changes: LaTeX moves comments off ``{#``, which it uses itself."""

    comment_start_string: str
    comment_end_string: str


def jinja_environment(
    autoescape: bool, templates: Path, **delimiters: Unpack[Delimiters]
) -> jinja2.Environment:
    """The kit's filters over the templates of one folder (a benchmark's own)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        **delimiters,
    )
    env.filters["num"] = number
    env.filters["signed"] = signed
    env.filters["pct"] = percent
    env.filters["tex"] = latex_escape
    env.filters["texbreak"] = latex_breakable
    return env


def tex_environment(templates: Path) -> jinja2.Environment:
    # LaTeX's "{#" (as in "\#" after a brace) must not open a Jinja comment.
    return jinja_environment(False, templates, comment_start_string="<#", comment_end_string="#>")
