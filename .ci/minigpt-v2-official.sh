#!/usr/bin/env bash
# MiniGPT-v2's original stack for its parity test (tests/models/test_minigpt_v2_parity.py), in its own virtualenv
# .venv-minigpt-v2: the pip pins of environment.yml of github.com/Vision-CAIR/MiniGPT-4 at the commit the
# kit follows (.ci/original-code.sh unpacks its minigpt4 package), for what importing minigpt4 pulls in:
# transformers 4.30.0, peft 0.2.0, timm 0.6.13, omegaconf 2.3.0, iopath, regex 2022.10.31, huggingface-hub
# 0.18.0, accelerate 0.20.3, tqdm 4.64.1, webdataset 0.2.48, opencv-python 4.7.0.72, decord 0.6.0,
# matplotlib 3.7.0, and the unpinned visual-genome, scikit-image, wandb; plus sentencepiece and protobuf,
# which its slow LlamaTokenizer needs (the environment gets them through sentence-transformers), and
# pandas, which minigpt4/common/utils.py imports. Departures, all for Python 3.11 on the CPU: torch is the
# kit's CPU wheel 2.13.0 with torchvision 0.28.0 (environment.yml pins torch 2.0.0, a CUDA build with about
# 2.5 GB of NVIDIA libraries; PyPI's torchvision 0.28.0 links CUDA libraries, so its compiled operators do
# not load and the parity driver leaves them out, see tests/minigpt_v2_official/); tokenizers 0.13.3 for
# 0.13.2 (no Python 3.11 wheel; its bug-fix release within transformers 4.30's range); pyyaml 6.0.1 for
# 6.0 (6.0 does not build under Cython 3); numpy below 2, pandas below 2.3 and scikit-image below 0.25
# (their releases for numpy 1); setuptools from 77.0.3 (torch 2.13.0's floor) and below 81, which still
# carries the pkg_resources that wandb's era imports. Left out: what
# only demos and training use (gradio, bitsandbytes 8-bit loading, sentence-transformers). About 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-minigpt-v2
.venv-minigpt-v2/bin/python -m pip install -q --upgrade pip
.venv-minigpt-v2/bin/python -m pip install -q torch==2.13.0 torchvision==0.28.0 "numpy<2" \
  transformers==4.30.0 tokenizers==0.13.3 peft==0.2.0 timm==0.6.13 omegaconf==2.3.0 iopath \
  pyyaml==6.0.1 regex==2022.10.31 huggingface-hub==0.18.0 accelerate==0.20.3 tqdm==4.64.1 \
  webdataset==0.2.48 opencv-python==4.7.0.72 decord==0.6.0 matplotlib==3.7.0 visual-genome \
  "scikit-image<0.25" wandb "pandas<2.3" "setuptools>=77.0.3,<81" sentencepiece==0.1.99 protobuf==4.25.1
