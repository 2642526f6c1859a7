"""A tiny random-weight Mantis (TIGER-Lab/Mantis-bakllava-7b): a LLaVA checkpoint in the llava-hf layout
whose language model is a Mistral, as BakLLaVA's is, with no chat template (Mantis formats its turns in
code), so the hf-mantis adapter loads it as it loads the real one.
"""

from __future__ import annotations

from pathlib import Path

from transformers import MistralConfig

from milebench.infer.tiny import save_tiny_llava, tiny_shape
from milebench.spec.model import ModelSpec


def build_tiny_mantis(spec: ModelSpec, out_dir: Path) -> None:
    """Write model and processor of ``spec`` into ``out_dir`` (``from_pretrained`` loads it)."""
    save_tiny_llava(tiny_shape(spec, "mantis"), MistralConfig, None, out_dir)
