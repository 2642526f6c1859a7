#!/usr/bin/env bash
# VideoChat2's original stack for its parity test (tests/models/test_videochat2_parity.py), in its own virtualenv
# .venv-videochat2: the pins of video_chat2/requirements.txt of github.com/OpenGVLab/Ask-Anything at the
# commit the kit follows (.ci/original-code.sh unpacks its video_chat2 folder) for what its inference path
# (models/videochat2_it.py, models/blip2/, conversation.py's Chat) imports: transformers 4.28.1, peft 0.3.0,
# timm, einops 0.6.1, sentencepiece 0.1.99 (the slow LlamaTokenizer), decord 0.6.0, numpy 1.23.5's
# line (numpy below 2). Departures, all for Python 3.11 on the CPU: torch is the kit's CPU wheel 2.13.0
# with torchvision 0.28.0 (requirements.txt pins torch 1.13.1+cu117 and torchvision 0.14.1+cu117);
# timm 0.6.13 for 0.6.12 (whose dataclasses Python 3.11 refuses to import: a mutable default; the
# next patch release); tokenizers 0.13.3 (no Python 3.11 wheel of the 0.13.2 transformers 4.28.1 first shipped with; in its
# range); huggingface-hub 0.16.4, safetensors 0.3.3 and accelerate 0.20.3 (peft 0.3.0 imports it), at
# releases of that time that install here; setuptools from 77.0.3 (torch 2.13.0's floor) and below 81 (accelerate 0.20.3
# imports pkg_resources, which setuptools 81 drops). Left out:
# flash-attn and apex (CUDA builds; the parity driver builds the model with use_flash_attention off, the
# plain modeling_llama.py) and what only the demo, data loading and training use (gradio, mmcv, wandb,
# av, opencv, fvcore). About 2 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-videochat2
.venv-videochat2/bin/python -m pip install -q --upgrade pip
.venv-videochat2/bin/python -m pip install -q torch==2.13.0 torchvision==0.28.0 "numpy<2" \
  transformers==4.28.1 tokenizers==0.13.3 huggingface-hub==0.16.4 safetensors==0.3.3 peft==0.3.0 \
  accelerate==0.20.3 timm==0.6.13 einops==0.6.1 sentencepiece==0.1.99 decord==0.6.0 protobuf==4.25.1 \
  "setuptools>=77.0.3,<81"
