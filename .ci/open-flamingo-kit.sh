#!/usr/bin/env bash
# The environment of the open-flamingo image on the CPU, in .venv-openflamingo-kit: the original code's
# stack (.ci/open-flamingo-official.sh: open-flamingo 2.0.1, open_clip_torch 2.20.0, transformers 4.37.0)
# with the kit installed beside it, as containers/open-flamingo installs it (no dependencies of its own
# but the base ones of containers/kit/requirements-base.in), plus pytest. The original code does not run
# under the kit's transformers 5 (its FlamingoLMMixin.forward needs the attention mask that transformers
# 5's generate no longer passes), so the open-flamingo tests and the ports run's jobs run here:
#   .venv-openflamingo-kit/bin/python -m pytest -q tests/models/test_tiny_open_flamingo.py tests/models/test_open_flamingo_parity.py
#   PATH="$PWD/.venv-openflamingo-kit/bin:$PATH" snakemake --cores all --config run=ports
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-openflamingo-kit

bash .ci/open-flamingo-official.sh "$VENV"
"$VENV/bin/python" -m pip install -q "pydantic>=2.7,<3" "pyyaml>=6" "jinja2>=3.1" rouge==1.0.1 "tqdm>=4.66" \
  "setuptools>=68" requests "docker>=7" "pytest>=8" "hypothesis>=6"
# The kit's other stages (fixture, preprocess, score, report), so the ports run's jobs run here too.
"$VENV/bin/python" -m pip install -q "rouge-score>=0.1.2" "matplotlib>=3.8" "scipy>=1.15" "statsmodels>=0.14" \
  "snakemake>=9,<10" numpy==1.26.4
"$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
