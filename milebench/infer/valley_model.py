"""Valley's model as its original code computes it (github.com/RupertLuo/Valley, ``valley/model/
valley_model.py``), over transformers' Llama and CLIP classes.

``ValleyLlamaForCausalLM`` is a Llama whose inner model holds a ``mm_projector`` (one Linear from the
tower's width) and a ``CLIPVisionModel`` built from ``mm_vision_tower`` (``ValleyLlamaModel.__init__``:
``CLIPVisionModel.from_pretrained`` of that name); training saves the whole model, so the checkpoint
holds the tower's weights too (``model.vision_tower.vision_model.*``, the names of transformers before 5),
and ``from_pretrained`` loads them over the named tower's. The kit builds the tower from the named
tower's config (``tower_config`` on the config) and loads every weight from the checkpoint. The config
is a Llama's with the ``mm_*`` keys; the tokenizer holds the six tokens ``initialize_vision_tokenizer``
added. :meth:`ValleyForCausalLM.multimodal_embeds` is ``ValleyLlamaModel.
forward``'s embedding step for one sample under ``patch_pooling_method: mean``: every frame through the
tower (``mm_vision_select_layer``), every feature projected, the patch features averaged over the frames
and written over the 256 ``<im_patch>`` after each ``<im_start>``, and each frame's CLS feature written
over the ``<vi_frame>`` tokens after ``<vi_start>``, where their count is the frame count (otherwise the
original's ``try`` drops the frame features and the ``<vi_frame>`` embeddings stay).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import transformers
from torch import nn
from transformers import CLIPVisionConfig, CLIPVisionModel, LlamaConfig, LlamaForCausalLM

from milebench.infer.adapter import AdapterError

IMAGE_PATCH = "<im_patch>"
IM_START = "<im_start>"
IM_END = "<im_end>"
VIDEO_FRAME = "<vi_frame>"
VI_START = "<vi_start>"
VI_END = "<vi_end>"
VISION_TOKENS = (IMAGE_PATCH, VIDEO_FRAME, IM_START, IM_END, VI_START, VI_END)
"""``valley/util/config.py``'s tokens in the order ``initialize_vision_tokenizer`` adds them."""
PATCHES = 256
"""The ``<im_patch>`` count ``build_inputs`` writes: CLIP ViT-L/14's patches at 224 pixels."""
DUMMY_WIDTH = 1024
"""``forward`` always projects ``torch.zeros(256, 1024)``: the projector must read 1024 features."""
TOWER_KEYS = (
    {"key_mapping": {r"^model\.vision_tower\.vision_model\.": "model.vision_tower."}}
    if int(transformers.__version__.split(".")[0]) >= 5
    else {}
)
"""``from_pretrained``'s arguments that read the checkpoint's tower names (those of transformers before 5,
``vision_model.`` inside the tower) into transformers 5's ``CLIPVisionModel``, which keeps its layers at
the top; before 5 the names are the model's own."""


@dataclass(frozen=True)
class ValleyTokens:
    """The ids ``init_vision_token`` sets on the tower's config."""

    im_patch: int
    im_start: int
    im_end: int
    vi_frame: int
    vi_start: int
    vi_end: int

    @classmethod
    def of(cls, tokenizer: Any) -> ValleyTokens:
        ids = [int(tokenizer.convert_tokens_to_ids(token)) for token in VISION_TOKENS]
        if tokenizer.unk_token_id in ids:
            missing = [t for t, i in zip(VISION_TOKENS, ids, strict=True) if i == tokenizer.unk_token_id]
            raise ValueError(f"the tokenizer lacks Valley's tokens {missing}")
        patch, frame, start, end, vi_start, vi_end = ids
        return cls(patch, start, end, frame, vi_start, vi_end)


class ValleyForCausalLM(LlamaForCausalLM):
    """The language model, projector and tower of a Valley checkpoint; the loader sets ``tokens``."""

    tokens: ValleyTokens

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.model.mm_projector = nn.Linear(config.mm_hidden_size, config.hidden_size)
        self.model.vision_tower = CLIPVisionModel(CLIPVisionConfig(**config.tower_config))

    @property
    def vision_tower(self) -> CLIPVisionModel:
        tower: CLIPVisionModel = self.model.vision_tower
        return tower

    def frame_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Each frame's selected hidden state of the tower (CLS first), projected: (frames, 1 + patches,
        hidden)."""
        tower = self.vision_tower
        out = tower(pixel_values.to(device=tower.device, dtype=tower.dtype), output_hidden_states=True)
        select = int(getattr(self.config, "mm_vision_select_layer", -1))
        projected: torch.Tensor = self.model.mm_projector(out.hidden_states[select])
        return projected

    def multimodal_embeds(self, ids: torch.Tensor, pixel_values: torch.Tensor) -> torch.Tensor:
        """Input embeddings of one sample's ids (1-D) with its frames written in, as ``forward`` does."""
        tokens = self.tokens
        embeds: torch.Tensor = self.get_input_embeddings()(ids)
        if int((ids == tokens.im_patch).sum()) == 0:
            return embeds
        features = self.frame_features(pixel_values)
        pooled, frames = torch.mean(features[:, 1:, :], dim=0), features[:, 0, :]
        patches = pooled.shape[0]
        if int((ids == tokens.im_start).sum()) != int((ids == tokens.im_end).sum()):
            raise AdapterError("the number of <im_start> and <im_end> tokens differs")
        for place in torch.where(ids == tokens.im_start)[0].tolist():
            if int(ids[place + patches + 1]) != tokens.im_end:
                raise AdapterError("Seems that the image is cut.")
            embeds = torch.cat((embeds[: place + 1], pooled, embeds[place + patches + 1 :]))
        return self.with_frames(ids, embeds, frames)

    def with_frames(self, ids: torch.Tensor, embeds: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """The frames' CLS features over the ``<vi_frame>`` tokens; the embeddings unchanged where the
        original's ``try`` fails (unmatched ``<vi_start>``/``<vi_end>``, another frame count, a video cut)."""
        tokens, count = self.tokens, frames.shape[0]
        starts = torch.where(ids == tokens.vi_start)[0].tolist()
        if len(starts) != int((ids == tokens.vi_end).sum()) or int((ids == tokens.vi_frame).sum()) != count:
            return embeds
        out = embeds
        for place in starts:
            if place + count + 1 >= ids.shape[0] or int(ids[place + count + 1]) != tokens.vi_end:
                return embeds
            out = torch.cat((out[: place + 1], frames, out[place + count + 1 :]))
        return out
