#!/usr/bin/env bash
# Video-LLaMA-2's original stack for its parity test (tests/models/test_video_llama_2_parity.py), in its own
# virtualenv .venv-video-llama-2: the pins of requirement.txt and environment.yml of
# github.com/DAMO-NLP-SG/Video-LLaMA at the commit the kit follows (.ci/original-code.sh unpacks its
# video_llama package and eval_configs) for what its vision-language inference path imports:
# transformers 4.28.0, timm 0.6.13, omegaconf 2.3.0, iopath 0.1.10, einops, sentencepiece (the slow
# LlamaTokenizer), webdataset 0.2.48, opencv-python 4.7.0.72, decord 0.6.0, regex 2022.10.31, ftfy (the
# ImageBind tokenizer the models package imports). Departures, all for
# Python 3.11 on the CPU: torch is the kit's CPU wheel 2.13.0 with torchvision 0.28.0 (environment.yml pins
# pytorch 1.12.1 and torchvision 0.13.1, CUDA builds; PyPI's torchvision 0.28.0 links CUDA libraries, so its
# compiled operators do not load and the parity driver leaves them out, see tests/video_llama_2_official/);
# tokenizers 0.13.3 for 0.13.2 (no Python 3.11 wheel; 0.13.3 is in transformers 4.28's range);
# huggingface-hub 0.16.4 for 0.13.4 and safetensors 0.3.3, at releases of that time that install here;
# opencv-python-headless 4.7.0.72 for opencv-python (no GUI libraries); sentencepiece 0.1.99, einops 0.6.1,
# ftfy 6.1.1 and pandas 2.0.3 (the datasets import it), unpinned there, at releases of that time; numpy
# below 2; setuptools from 77.0.3 (torch 2.13.0's floor). Left out: torchaudio (no release for torch
# 2.13.0) and pytorchvideo, which only the audio loader video_llama/models/ImageBind/data.py imports (the
# parity driver leaves that module out; pictures never reach it), and what only the demo, training and
# scoring use (gradio, bitsandbytes, accelerate, wandb, spacy, scikit-learn). About 2 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-video-llama-2
.venv-video-llama-2/bin/python -m pip install -q --upgrade pip
.venv-video-llama-2/bin/python -m pip install -q torch==2.13.0 torchvision==0.28.0 "numpy<2" \
  transformers==4.28.0 tokenizers==0.13.3 huggingface-hub==0.16.4 safetensors==0.3.3 timm==0.6.13 \
  omegaconf==2.3.0 iopath==0.1.10 einops==0.6.1 sentencepiece==0.1.99 webdataset==0.2.48 pandas==2.0.3 \
  opencv-python-headless==4.7.0.72 decord==0.6.0 regex==2022.10.31 ftfy==6.1.1 protobuf==4.25.1 \
  "setuptools>=77.0.3"
