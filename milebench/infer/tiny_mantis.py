"""A tiny random-weight Mantis (TIGER-Lab/Mantis-bakllava-7b): a LLaVA checkpoint in the llava-hf layout
whose language model is a Mistral, as BakLLaVA's is, with no chat template (Mantis formats its turns in
code) and a tokenizer that starts every text with BOS, as Llama's and Mistral's do, so the hf-mantis
adapter loads it as it loads the real one. The weights are written as released
(``milebench.infer.tiny.as_released``).
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, processors
from transformers import MistralConfig

from milebench.infer.tiny import as_released, save_tiny_llava, tiny_shape
from milebench.spec.model import ModelSpec


def build_tiny_mantis(spec: ModelSpec, out_dir: Path) -> None:
    """Write model and processor of ``spec`` into ``out_dir`` (``from_pretrained`` loads it)."""
    save_tiny_llava(tiny_shape(spec, "mantis"), MistralConfig, None, out_dir)
    as_released(out_dir / "model.safetensors", "vision_tower.")
    path = str(out_dir / "tokenizer.json")
    tokenizer = Tokenizer.from_file(path)
    bos = ("<s>", tokenizer.token_to_id("<s>"))
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[bos])
    tokenizer.save(path)
