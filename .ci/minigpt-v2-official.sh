#!/usr/bin/env bash
# MiniGPT-v2's original stack for its parity test (tests/test_minigpt_v2_parity.py), in its own virtualenv
# .venv-minigpt-v2: the pip pins of environment.yml of github.com/Vision-CAIR/MiniGPT-4 at the commit the
# kit follows (.ci/original-code.sh unpacks its minigpt4 package), as far as MiniGPT-v2's inference imports
# them: transformers 4.30.0, peft 0.2.0, timm 0.6.13, omegaconf 2.3.0, iopath, pyyaml 6.0, regex 2022.10.31,
# huggingface-hub 0.18.0, accelerate 0.20.3, tqdm 4.64.1, plus sentencepiece and protobuf, which its slow
# LlamaTokenizer needs (the environment gets them through sentence-transformers). Departures, all for
# Python 3.11 on the CPU: torch is the kit's CPU wheel 2.13.0 with its torchvision 0.28.0 (environment.yml
# pins torch 2.0.0, a CUDA build with about 2.5 GB of NVIDIA libraries, and an unpinned torchvision);
# tokenizers 0.13.3 instead of 0.13.2 (0.13.2 has no Python 3.11 wheel and needs a Rust toolchain to
# build; 0.13.3 is its bug-fix release within transformers 4.30's range); pyyaml 6.0.1 instead of 6.0
# (6.0 does not build under Cython 3); numpy below 2 (transformers 4.30 and timm 0.6 predate numpy 2).
# Left out: what demos, training and other models use (gradio, bitsandbytes 8-bit loading, decord,
# opencv, webdataset, wandb, visual-genome, scikit-image, matplotlib, sentence-transformers).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-minigpt-v2
.venv-minigpt-v2/bin/python -m pip install -q --upgrade pip
.venv-minigpt-v2/bin/python -m pip install -q torch==2.13.0 torchvision==0.28.0 "numpy<2" \
  transformers==4.30.0 tokenizers==0.13.3 peft==0.2.0 timm==0.6.13 omegaconf==2.3.0 iopath \
  pyyaml==6.0.1 regex==2022.10.31 huggingface-hub==0.18.0 accelerate==0.20.3 tqdm==4.64.1 \
  sentencepiece==0.1.99 protobuf==4.25.1
