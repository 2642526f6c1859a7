"""VILA's model as its original code computes it (github.com/Efficient-Large-Model/VILA, ``llava/model``),
over transformers' Llama and CLIP classes.

VILA's code is LLaVA's with Llama-2 underneath, and so is its checkpoint (Efficient-Large-Model/VILA-7b):
the main weights are a Llama (``model.*``, ``lm_head``) plus ``model.mm_projector.*``, the config is of
model type ``llava_llama`` with the ``mm_*`` keys, and the vision tower is loaded apart, from where
``mm_vision_tower`` names (``CLIPVisionTower.load_model``: ``CLIPVisionModel`` and
``CLIPImageProcessor.from_pretrained`` of that name; tower weights in the main checkpoint are ignored,
as the tower is built with ``delay_load``). :class:`VilaForCausalLM` is Yi-VL's composition
(:mod:`milebench.infer.yi_vl_model`, the same ``LlavaMetaForCausalLM`` lineage) with VILA's
``build_vision_projector`` (``linear``, ``mlp<N>x_gelu``, ``identity``) and the one step of VILA's
``prepare_inputs_labels_for_multimodal`` that Yi's lacks: the embeddings are cut to the config's
``tokenizer_model_max_length`` (the training tokenizer's limit, saved into the config), a warning and
no more in the original.
"""

from __future__ import annotations

from torch import nn
from transformers import LlamaConfig

from milebench.infer.adapter import AdapterError
from milebench.infer.yi_vl_model import MLP_GELU, YiVLForCausalLM, build_projector

PROJECTORS = ("linear", "mlp<N>x_gelu", "identity")
"""The ``mm_projector_type`` values VILA's ``build_vision_projector`` knows."""


def vila_projector(config: LlamaConfig) -> nn.Module:
    """VILA's ``build_vision_projector``: ``linear`` one Linear, ``mlp<N>x_gelu`` Linear then per further
    layer GELU and Linear, ``identity`` nothing; anything else is refused, as the original raises."""
    kind = str(getattr(config, "mm_projector_type", "linear"))
    if kind == "linear":
        return nn.Linear(config.mm_hidden_size, config.hidden_size)
    if kind == "identity":
        return nn.Identity()
    if MLP_GELU.match(kind) is None:
        raise AdapterError(f"mm_projector_type {kind!r}: VILA's code builds only {', '.join(PROJECTORS)}")
    return build_projector(config)


def max_positions(config: LlamaConfig) -> int | None:
    """``tokenizer_model_max_length``, where the original cuts a sample's embeddings; None: no cut."""
    value = getattr(config, "tokenizer_model_max_length", None)
    return None if value is None else int(value)


class VilaForCausalLM(YiVLForCausalLM):
    """The language model and projector of a VILA checkpoint; ``attach_vision_tower`` adds the tower."""

    @staticmethod
    def projector(config: LlamaConfig) -> nn.Module:
        return vila_projector(config)
