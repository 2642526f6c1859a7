#!/usr/bin/env bash
# LLaMA-VID's original stack for its parity test (tests/models/test_llama_vid_parity.py), in its own virtualenv
# .venv-llama-vid: the pins of pyproject.toml of github.com/dvlab-research/LLaMA-VID at the commit the kit
# follows (.ci/original-code.sh unpacks its llamavid package) for what its inference path imports:
# transformers 4.31.0, accelerate 0.21.0, timm 0.6.13 (the EVA ViT's layers), einops 0.6.1, sentencepiece
# 0.1.99 (the slow LlamaTokenizer), and the `llava` package its evaluation scripts take tokenizer_image_token
# and KeywordsStoppingCriteria from. Departures, all for Python 3.11 on the CPU: torch is the kit's CPU wheel
# 2.13.0 with torchvision 0.28.0 (the pyproject pins torch 2.0.1 and torchvision 0.15.2, CUDA builds with
# about 2.5 GB of NVIDIA libraries; timm imports torchvision, whose compiled operators the CPU torch cannot
# load, and the parity driver leaves them out); llava is llava-torch 1.1.1 from PyPI without its pins (the
# pyproject names LLaVA's GitHub commit 1619889c of October 2023, which has no release there; 1.1.1 is the
# release of that month, with the same mm_utils); tokenizers 0.13.3 (transformers 4.31's range, with Python
# 3.11 wheels); numpy below 2; setuptools from 77.0.3 (torch 2.13.0's floor). Left out: what only training,
# the demos and the movie pipeline use (deepspeed, gradio, peft, bitsandbytes, decord, wandb). About 2
# minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-llama-vid
.venv-llama-vid/bin/python -m pip install -q --upgrade pip
.venv-llama-vid/bin/python -m pip install -q torch==2.13.0 torchvision==0.28.0 "numpy<2" \
  transformers==4.31.0 tokenizers==0.13.3 accelerate==0.21.0 timm==0.6.13 einops==0.6.1 \
  sentencepiece==0.1.99 protobuf==4.25.1 "setuptools>=77.0.3"
.venv-llama-vid/bin/python -m pip install -q --no-deps llava-torch==1.1.1
