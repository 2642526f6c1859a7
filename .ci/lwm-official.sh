#!/usr/bin/env bash
# LWM's original stack for its parity test (tests/models/test_lwm_parity.py), in its own virtualenv .venv-lwm: the
# pins of requirements.txt of github.com/LargeWorldModel/LWM at the commit the kit follows
# (.ci/original-code.sh unpacks its lwm package) for what lwm/vision_chat.py imports: flax 0.7.0, optax
# 0.1.7, chex 0.1.82, transformers 4.29.2, ml_collections, sentencepiece, einops, decord, Pillow and tux.
# Departures, all for Python 3.11 on the CPU: JAX is the CPU build jax/jaxlib 0.4.23 (unpinned there; the
# first of the releases of its time whose jax.experimental holds pallas's TPU module, which
# lwm/ring_attention.py imports); tux is PyPI's 0.0.2 (the file names tux's git HEAD, which PyPI does not
# hold; the driver shims the three things 0.0.2 lacks on Python 3.11 and this JAX); ml_collections 0.1.1,
# tokenizers 0.13.3 (transformers 4.29's range), sentencepiece 0.1.99, decord 0.6.0, numpy below 2 and
# scipy 1.11.4 (unpinned there: releases of its time with Python 3.11 wheels); torch is the kit's CPU
# wheel 2.13.0, with which the driver writes the frames it fed the VQGAN. Left out: what only training,
# data loading and logging use (datasets, wandb's own use, gcsfs's, tiktoken, ipdb), which tux pulls in
# anyway. About 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv-lwm
.venv-lwm/bin/python -m pip install -q --upgrade pip
.venv-lwm/bin/python -m pip install -q torch==2.13.0 "numpy<2" jax==0.4.23 jaxlib==0.4.23 flax==0.7.0 \
  optax==0.1.7 chex==0.1.82 transformers==4.29.2 tokenizers==0.13.3 sentencepiece==0.1.99 einops==0.8.2 \
  ml_collections==0.1.1 tux==0.0.2 Pillow decord==0.6.0 scipy==1.11.4 absl-py
