#!/usr/bin/env bash
# OpenFlamingo's original code for its parity test (tests/models/test_open_flamingo_parity.py), in its own
# virtualenv .venv-openflamingo: open-flamingo 2.0.1 from PyPI (the release of 2023-08-15) with the
# libraries it runs on (open_clip_torch 2.20.0, einops 0.6.1, einops-exts 0.0.4 of its time; sentencepiece
# 0.1.98 as its setup.py pins; transformers 4.37.0 with tokenizers 0.15.2, within its transformers>=4.28.1,
# with a native MPT, and the transformers of the kit's paper-era images, so the kit's adapter runs beside
# it in the same stack: .ci/open-flamingo-kit.sh). A first argument names another virtualenv folder. One departure, for the CPU: torch is the kit's
# CPU wheel (2.13.0) instead of the pinned 2.0.1, which PyPI has only as a CUDA build, so open-flamingo
# comes without its own pins; open_clip's transforms run on torchvision 0.15.2 (the release's torch
# 2.0.1's), installed without its torch pin: PyPI's torchvision of torch 2.13 loads only beside the CUDA
# build, and the transforms are Python (PIL resizing, ToTensor, Normalize), not its compiled ops.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-openflamingo}"

python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q torch==2.13.0 \
  open_clip_torch==2.20.0 einops==0.6.1 einops-exts==0.0.4 transformers==4.37.0 tokenizers==0.15.2 \
  sentencepiece==0.1.98 numpy==1.26.4 pillow==10.4.0 huggingface-hub==0.20.3 safetensors==0.4.2
"$VENV/bin/python" -m pip install -q --no-deps open-flamingo==2.0.1 torchvision==0.15.2
