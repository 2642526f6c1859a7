"""The README is the quick start and the recipes; the manual lives in docs/. Both stay navigable: every
relative link points at a file that exists."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_LIMIT = 12 * 1024
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_stays_within_twelve_kilobytes() -> None:
    assert (ROOT / "README.md").stat().st_size <= README_LIMIT


def test_the_readme_links_every_manual_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {Path(target).name for target in LINK.findall(readme)}
    pages = {page.name for page in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, f"manual pages the README does not link: {sorted(pages - linked)}"


@pytest.mark.parametrize("document", documents(), ids=lambda path: path.name)
def test_every_relative_link_resolves(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    relative = [target for target in LINK.findall(text) if "://" not in target]
    missing = [target for target in relative if not (document.parent / target).exists()]
    assert not missing, f"{document.name}: links to missing files: {missing}"


SNAKEMAKE_CONFIG = re.compile(r"snakemake [^`\n#]*?--config((?: +[^\s`#\]]+)*)")


@pytest.mark.parametrize("document", documents(), ids=lambda path: path.name)
def test_documented_snakemake_commands_put_targets_before_config(document: Path) -> None:
    """Snakemake 9's ``--config`` takes every word after it as a key=value pair, so a target written after
    it is refused (``Invalid config definition``): a target comes first."""
    text = re.sub(r"<[^>]*>", "NAME", document.read_text(encoding="utf-8"))  # placeholders: one word
    swallowed = [
        f"--config{words}"
        for words in SNAKEMAKE_CONFIG.findall(text)
        if any("=" not in word for word in words.split())
    ]
    assert not swallowed, f"{document.name}: targets after --config: {swallowed}"
