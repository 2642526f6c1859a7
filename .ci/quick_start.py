"""Print the shell blocks of a README's "Quick start" section, in order, as one script: CI runs what the
README tells a newcomer to run, so the two cannot drift apart."""

from __future__ import annotations

import re
import sys
from pathlib import Path

SECTION = re.compile(r"^## Quick start\n(.*?)(?=^## |\Z)", re.M | re.S)
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)


def quick_start(readme: str) -> str:
    section = SECTION.search(readme)
    if section is None:
        raise SystemExit("README: no '## Quick start' section")
    blocks = BLOCK.findall(section.group(1))
    if not blocks:
        raise SystemExit("README: the Quick start section has no ```bash block")
    return "".join(blocks)


if __name__ == "__main__":
    sys.stdout.write(quick_start(Path(sys.argv[1]).read_text(encoding="utf-8")))
