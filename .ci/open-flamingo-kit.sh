#!/usr/bin/env bash
# The environment of the open-flamingo image on the CPU, in .venv-openflamingo-kit: the original code's
# stack (.ci/open-flamingo-official.sh: open-flamingo 2.0.1, open_clip_torch 2.20.0, transformers 4.37.0)
# with the kit installed beside it, as containers/open-flamingo installs it (no dependencies of its own
# but the base ones of containers/kit/requirements-base.in), plus pytest. The original code does not run
# under the kit's transformers 5 (its FlamingoLMMixin.forward needs the attention mask that transformers
# 5's generate no longer passes), so the open-flamingo tests run here:
#   .venv-openflamingo-kit/bin/python -m pytest -q tests/test_tiny_open_flamingo.py tests/test_open_flamingo_parity.py
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-openflamingo-kit

bash .ci/open-flamingo-official.sh "$VENV"
"$VENV/bin/python" -m pip install -q "pydantic>=2.7,<3" "pyyaml>=6" "jinja2>=3.1" rouge==1.0.1 "tqdm>=4.66" \
  "setuptools>=68" requests "pytest>=8" "hypothesis>=6"
"$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
