"""Yi-VL's model as its original code computes it (github.com/01-ai/Yi, ``VL/llava/model``), over
transformers' Llama and CLIP classes.

The checkpoint (01-ai/Yi-VL-6B) is in the original LLaVA layout, not transformers' LLaVA one: the main
weights are a Llama (``model.*``, ``lm_head``) plus ``model.mm_projector.*``, and the vision tower lives in
a subfolder of its own (``mm_vision_tower``). Its projector (``mm_projector_type: mlp2x_gelu_Norm``) has a
LayerNorm after each Linear, which transformers' ``LlavaMultiModalProjector`` (Linear, GELU, Linear) has
no place for. So the kit loads the parts as the original does: :class:`YiVLForCausalLM` is the original
``LlavaLlamaForCausalLM`` without its training code (the Llama with the projector built by the original
``build_vision_projector``, whose ``nn.Sequential`` gives the checkpoint's key names), and the vision
tower is a ``CLIPVisionModel`` from the subfolder, as ``CLIPVisionTower.load_model`` loads it (vision
weights in the main checkpoint, if any, are ignored there too). :meth:`YiVLForCausalLM.multimodal_embeds`
is ``prepare_inputs_labels_for_multimodal`` for one sample.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import nn
from transformers import CLIPVisionModel, LlamaConfig, LlamaForCausalLM

from milebench.infer.adapter import AdapterError

IMAGE_TOKEN_INDEX = -200
"""The id ``tokenizer_image_token`` puts in place of each image (``llava.model.constants``)."""
SELECT_FEATURES = {"patch": 1, "cls_patch": 0}
"""``mm_vision_select_feature`` -> leading features dropped (``patch`` drops the CLS feature)."""
MLP_GELU = re.compile(r"^mlp(\d+)x_gelu$")


def dropped_features(config: LlamaConfig) -> int:
    """Leading tower features the config's ``mm_vision_select_feature`` drops (``patch``: the CLS one)."""
    feature = str(getattr(config, "mm_vision_select_feature", "patch"))
    if feature not in SELECT_FEATURES:
        raise AdapterError(f"mm_vision_select_feature {feature!r}: expected one of {sorted(SELECT_FEATURES)}")
    return SELECT_FEATURES[feature]


def build_projector(config: LlamaConfig) -> nn.Module:
    """The original ``build_vision_projector`` for its ``mlp<N>x_gelu`` kinds: Linear, then per further
    layer GELU and Linear, a LayerNorm after each Linear when the kind ends in ``_Norm``."""
    kind = str(getattr(config, "mm_projector_type", "linear"))
    norm = "_Norm" in kind
    match = MLP_GELU.match(kind.replace("_Norm", ""))
    if match is None:
        raise AdapterError(
            f"mm_projector_type {kind!r}: the kit ports Yi-VL's mlp<N>x_gelu[_Norm] projectors"
        )
    hidden = config.hidden_size

    def linear(width: int) -> list[nn.Module]:
        return [nn.Linear(width, hidden), *([nn.LayerNorm(hidden)] if norm else [])]

    modules = linear(config.mm_hidden_size)
    for _ in range(1, int(match.group(1))):
        modules += [nn.GELU(), *linear(hidden)]
    return nn.Sequential(*modules)


class YiVLForCausalLM(LlamaForCausalLM):
    """The language model and projector of a Yi-VL checkpoint; ``attach_vision_tower`` adds the tower."""

    vision_tower: CLIPVisionModel
    select_layer: int
    select_from: int

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.model.mm_projector = self.projector(config)

    @staticmethod
    def projector(config: LlamaConfig) -> nn.Module:
        """The projector the family's ``build_vision_projector`` makes of the config."""
        return build_projector(config)

    def attach_vision_tower(self, tower: CLIPVisionModel) -> None:
        """The tower and the config's feature choice (``mm_vision_select_layer``, ``..._feature``)."""
        self.vision_tower = tower
        self.select_layer = int(self.config.mm_vision_select_layer)
        self.select_from = dropped_features(self.config)

    def image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """``encode_images``: the selected hidden state of the tower, in the pictures' dtype, projected."""
        tower = self.vision_tower
        out = tower(pixel_values.to(device=tower.device, dtype=tower.dtype), output_hidden_states=True)
        features = out.hidden_states[self.select_layer][:, self.select_from :].to(pixel_values.dtype)
        projected: torch.Tensor = self.model.mm_projector(features)
        return projected

    def multimodal_embeds(self, ids: torch.Tensor, pixel_values: torch.Tensor | None) -> torch.Tensor:
        """Input embeddings of one sample's ids (1-D): the text between image ids embedded piece by piece,
        each image id replaced by its picture's features, in order."""
        embed: Any = self.get_input_embeddings()
        places = (ids == IMAGE_TOKEN_INDEX).nonzero().flatten().tolist()
        if not places:
            return embed(ids)
        if pixel_values is None or pixel_values.shape[0] != len(places):
            got = 0 if pixel_values is None else pixel_values.shape[0]
            raise AdapterError(f"{len(places)} image ids but {got} pictures")
        features = self.image_features(pixel_values)
        pieces, start = [], 0
        for picture, place in zip(features, places, strict=True):
            pieces += [embed(ids[start:place]), picture]
            start = place + 1
        if start < ids.shape[0]:
            pieces.append(embed(ids[start:]))
        return torch.cat(pieces)
