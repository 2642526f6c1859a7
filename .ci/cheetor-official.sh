#!/usr/bin/env bash
# Cheetor's original stack for its parity test (tests/models/test_cheetor_parity.py), in its own virtualenv
# .venv-cheetor: the pins of Cheetah/requirement.txt of github.com/DCDmllm/Cheetah at the commit the kit
# follows (.ci/original-code.sh unpacks its cheetah package), for what importing cheetah pulls in:
# transformers 4.31.0, timm 0.4.12, omegaconf 2.3.0, iopath 0.1.10, numpy 1.24.3, pandas 2.0.2,
# opencv_python_headless 4.5.5.64, Requests 2.31.0, tqdm 4.65.0, SentencePiece 0.1.99 (its slow
# LlamaTokenizer). Departures, all for Python 3.11 on the CPU: torch is the kit's CPU wheel 2.13.0 with
# torchvision 0.28.0 (requirement.txt pins torch 2.0.1 and torchvision 0.15.2, CUDA builds; PyPI's
# torchvision 0.28.0 links CUDA libraries, so its compiled operators do not load and the parity driver
# leaves them out, see tests/cheetor_official/); PyYAML 6.0.1 for 6.0 (6.0 does not build under Cython 3);
# tokenizers 0.13.3, huggingface-hub 0.16.4 and safetensors 0.3.3, unpinned there, at releases of
# transformers 4.31's time; setuptools from 77.0.3 (torch 2.13.0's floor); Pillow 13.0.0, the kit's and the
# cheetor image's, for 10.0.0: Pillow's bicubic resize gives other bytes on some fixture pictures between
# the two, so with 10.0.0 the test would compare Pillow releases, not Cheetor's code with the kit's (the
# spec's execution names the difference). Left out: what only the demo,
# the training and the DEMON scoring use (gradio, decord, matplotlib, scikit-learn, scipy, rouge,
# ruamel.base). About 3 minutes: 4.8 minutes measured with two other installs running beside it, 43 s
# of them CPU, the rest downloads (the torch CPU wheel the largest).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-cheetor
.venv-cheetor/bin/python -m pip install -q --upgrade pip
.venv-cheetor/bin/python -m pip install -q torch==2.13.0 torchvision==0.28.0 numpy==1.24.3 \
  transformers==4.31.0 tokenizers==0.13.3 huggingface-hub==0.16.4 safetensors==0.3.3 timm==0.4.12 \
  omegaconf==2.3.0 iopath==0.1.10 pyyaml==6.0.1 pandas==2.0.2 pillow==13.0.0 \
  opencv-python-headless==4.5.5.64 requests==2.31.0 tqdm==4.65.0 sentencepiece==0.1.99 \
  "setuptools>=77.0.3,<81"
