#!/usr/bin/env bash
# VILA's original stack for its parity test (tests/models/test_vila_parity.py), in its own virtualenv .venv-vila:
# the pins of github.com/Efficient-Large-Model/VILA at the commit the kit follows (.ci/original-code.sh
# unpacks its llava package) for what its inference path imports: transformers 4.36.2 (environment_setup.sh
# installs it over pyproject.toml's 4.31.0 and copies llava/train/transformers_replace over its Llama; the
# parity driver loads that replacement in place of transformers' module instead of writing into the
# environment), with tokenizers 0.15.2 (the release transformers 4.36.2 resolved to when the commit was
# made), sentencepiece 0.1.99 and accelerate 0.21.0 (pyproject.toml), huggingface-hub 0.20.3, safetensors
# 0.4.2, numpy 1.26.4, Pillow 10.2.0 and requests (unpinned there; the releases of early 2024). Departures,
# for Python 3.11 on the CPU: torch is the kit's CPU wheel 2.13.0 (pyproject.toml pins torch 2.0.1, a CUDA
# build with about 2.5 GB of NVIDIA libraries); flash-attn 2.4.2 (a CUDA-only wheel, which the replaced
# Llama imports and always attends with) is not installed: the driver gives that module torch's exact
# attention (tests/vila_official/). Left out: what only training, the demo server and the evaluation
# scripts use (deepspeed, gradio, peft, bitsandbytes, datasets, webdataset, openai, ...). About 3 minutes
# on a shared 2-core machine (35 s of CPU; the rest is downloading torch and transformers).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-vila
.venv-vila/bin/python -m pip install -q --upgrade pip
.venv-vila/bin/python -m pip install -q torch==2.13.0 transformers==4.36.2 tokenizers==0.15.2 \
  sentencepiece==0.1.99 accelerate==0.21.0 huggingface-hub==0.20.3 safetensors==0.4.2 numpy==1.26.4 \
  pillow==10.2.0 requests
