#!/usr/bin/env bash
# The official LLaVA stack for the parity test (tests/models/test_llava_parity.py), in its own virtualenv
# .venv-llava: llava-torch 1.2.2.post1 (the `llava` package the official MileBench worker imports) with
# the official requirements.txt pins of the libraries it runs on (transformers 4.37.0, tokenizers
# 0.15.2, sentencepiece 0.1.99, accelerate 0.24.0, numpy 1.26.2, Pillow 9.3.0, huggingface-hub 0.20.3,
# safetensors 0.4.2, protobuf 4.25.1). Two departures, both for the CPU: torch is the kit's CPU wheel
# (the official 2.1.1 exists on PyPI only as a CUDA build that pulls about 2.5 GB of NVIDIA
# libraries), and llava-torch comes without its own pins (torch 2.0.1, transformers 4.36.2, gradio,
# ...), which serve its demo server and training. Takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-llava
.venv-llava/bin/python -m pip install -q --upgrade pip
.venv-llava/bin/python -m pip install -q torch==2.13.0 transformers==4.37.0 tokenizers==0.15.2 \
  sentencepiece==0.1.99 accelerate==0.24.0 numpy==1.26.2 pillow==9.3.0 huggingface-hub==0.20.3 \
  safetensors==0.4.2 protobuf==4.25.1
.venv-llava/bin/python -m pip install -q --no-deps llava-torch==1.2.2.post1
