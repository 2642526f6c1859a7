#!/usr/bin/env bash
# Valley's original stack for its parity test (tests/models/test_valley_parity.py), in its own virtualenv
# .venv-valley: the pins of pyproject.toml of github.com/RupertLuo/Valley at the commit the kit follows
# (.ci/original-code.sh unpacks its valley package) for what its inference path imports
# (valley/model/valley_model.py and valley/util/data_util.py): transformers, torchvision, decord,
# scikit-image, opencv-python-headless (video_transform.py), numpy and sentencepiece. Departures, all for
# Python 3.11 on the CPU: transformers is 4.28.0, the first release with Llama (the pyproject names
# GitHub commit cae78c46 of April 2023, which PyPI does not hold; 4.28.0 is its release); tokenizers is
# 0.13.3 (the pyproject pins 0.12.1, which has no Python 3.11 wheel; 0.13.3 is in transformers 4.28's
# range); torch is the kit's CPU wheel 2.13.0 with torchvision 0.28.0 (unpinned there); numpy below 2,
# scikit-image 0.20.0, opencv-python-headless 4.7.0.72, decord 0.6.0 and sentencepiece 0.1.99 (unpinned
# there: the releases of spring 2023 with Python 3.11 wheels); protobuf 3.20.3 (what transformers 4.28's
# conversion of a SentencePiece tokenizer to its fast one loads with); setuptools from 77.0.3 (torch
# 2.13.0's floor). Left out: what only training and the demo server use (deepspeed, gradio,
# peft, wandb, fastapi, uvicorn, markdown2, ninja, einops, accelerate, prettytable). About 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-valley
.venv-valley/bin/python -m pip install -q --upgrade pip
.venv-valley/bin/python -m pip install -q torch==2.13.0 torchvision==0.28.0 "numpy<2" \
  transformers==4.28.0 tokenizers==0.13.3 scikit-image==0.20.0 opencv-python-headless==4.7.0.72 \
  decord==0.6.0 sentencepiece==0.1.99 protobuf==3.20.3 "setuptools>=77.0.3"
