"""MileBench's report as HTML, as LaTeX and as its provenance document, from its shipped templates."""

from __future__ import annotations

from milebench.benchmarks.milebench.paths import PROVENANCE_TEX
from milebench.benchmarks.milebench.report.tables import Report
from milebench.package_data import package_path
from milebench.report.render import FIGURES, jinja_environment, tex_environment

TEMPLATES = package_path("milebench.benchmarks.milebench.report", "templates")


def render_html(report: Report) -> str:
    return jinja_environment(True, TEMPLATES).get_template("report.html.j2").render(report=report)


def render_tex(report: Report) -> str:
    """The report's LaTeX, pointing to its provenance document beside it."""
    return (
        tex_environment(TEMPLATES)
        .get_template("report.tex.j2")
        .render(report=report, figures_dir=FIGURES, provenance_file=PROVENANCE_TEX)
    )


def render_provenance_tex(report: Report) -> str:
    """The provenance in full, a LaTeX document compiled on its own."""
    return tex_environment(TEMPLATES).get_template("report-provenance.tex.j2").render(report=report)
