"""``python -m milebench`` runs the CLI, so rules work without the console script on PATH."""

import sys

from milebench.cli import main

sys.exit(main())
