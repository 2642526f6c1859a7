"""LLaMA-VID's model as its original code computes it at inference (github.com/dvlab-research/LLaMA-VID,
``llamavid/model``), over transformers' Llama.

A checkpoint is the original ``LlavaLlamaAttForCausalLM``: a Llama (``model.*``, ``lm_head``) with the
projector ``model.mm_projector`` (``build_vision_projector``, ``mlp2x_gelu``) and the text-guided
attention modules ``model.vlm_att_*`` that make each frame's context token: a BERT Q-Former in the layout
of BLIP-2's (``qformer.py``, ``vlm_att_encoder.bert``), its query tokens ``vlm_att_query``, the LayerNorm
``vlm_att_ln`` over the vision features, and the ``vlm_att_projector``, ``..._key_projector`` and
``..._val_projector`` Linears (``vlm_att_bert_proj`` too where the tower's width is not the Q-Former's
1408). The vision tower is not in it: ``EVAVisionTowerLavis`` loads the EVA ViT-g from the ``.pth`` file
``mm_vision_tower`` names (the kit's :class:`~milebench.infer.minigpt_v2_model.EvaViT`, the same
``eva_vit.py`` class, without the final norm, its 257 features).

Per sample, ``prepare_inputs_labels_for_multimodal`` with the sample's pictures as the frames of one
video: ``encode_images`` (the tower on all frames), ``vlm_attention`` (the Q-Former reads the prompt, once
per frame, with the frame's features; ``token_generation`` turns its query outputs into one context token
by attention over the frame's patches, and mean-pools the patches into one content token under
``compress_type: mean``), and the frames' tokens, two per frame in order, in place of the one image id.
No library in the kit's stack holds this BERT under these names, so :class:`QFormer` is written here, key
for key as ``qformer.py`` names it (absolute positions, cross-attention every ``cross_attention_freq``
layers on the query positions only, separate feed-forward layers for queries and text).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from milebench.infer.adapter import AdapterError
from milebench.infer.minigpt_v2_model import EvaShape, EvaViT, interpolated_pos_embed
from milebench.infer.yi_vl_model import IMAGE_TOKEN_INDEX, build_projector

QFORMER_WIDTH = 1408
"""The vision width ``initialize_attention_modules`` gives a ``*pretrain*`` Q-Former (EVA ViT-g's)."""
BERT_PROMPT_LENGTH = 256
"""``vlm_attention`` tokenizes the prompt for the Q-Former with ``max_length=256`` (left truncation)."""

__all__ = ["IMAGE_TOKEN_INDEX", "LlamaVidForCausalLM", "QFormer", "QFormerShape"]


@dataclass(frozen=True)
class QFormerShape:
    """The BERT's sizes (``BertConfig.from_pretrained("bert-base-uncased")`` in ``init_bert``) and the
    vision width its cross-attention reads (``encoder_width``)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    layer_norm_eps: float
    encoder_width: int
    cross_attention_freq: int = 2
    pad_token_id: int = 0

    @classmethod
    def from_bert_config(cls, config: dict[str, Any], vocab_size: int, encoder_width: int) -> QFormerShape:
        """From a BERT ``config.json``, with the vocabulary as resized to the tokenizer ([DEC] added)."""
        if config.get("hidden_act", "gelu") != "gelu" or config.get(
            "position_embedding_type", "absolute"
        ) != ("absolute"):
            raise AdapterError(
                "the Q-Former's BERT config: the kit ports hidden_act gelu, absolute positions"
            )
        return cls(
            vocab_size=vocab_size,
            hidden_size=int(config["hidden_size"]),
            num_hidden_layers=int(config["num_hidden_layers"]),
            num_attention_heads=int(config["num_attention_heads"]),
            intermediate_size=int(config["intermediate_size"]),
            max_position_embeddings=int(config["max_position_embeddings"]),
            layer_norm_eps=float(config["layer_norm_eps"]),
            encoder_width=encoder_width,
            pad_token_id=int(config.get("pad_token_id", 0)),
        )


class SelfOutput(nn.Module):
    """``BertSelfOutput`` and ``BertOutput``: dense, then LayerNorm of it plus the input."""

    def __init__(self, width: int, shape: QFormerShape) -> None:
        super().__init__()
        self.dense = nn.Linear(width, shape.hidden_size)
        self.LayerNorm = nn.LayerNorm(shape.hidden_size, eps=shape.layer_norm_eps)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.LayerNorm(self.dense(hidden) + residual)
        return out


class Intermediate(nn.Module):
    def __init__(self, shape: QFormerShape) -> None:
        super().__init__()
        self.dense = nn.Linear(shape.hidden_size, shape.intermediate_size)
        self.intermediate_act_fn = nn.GELU()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.intermediate_act_fn(self.dense(hidden))
        return out


class SelfAttention(nn.Module):
    """``BertSelfAttention`` with absolute positions: scores over the head size's root, the additive mask,
    softmax, the weighted values."""

    def __init__(self, shape: QFormerShape, cross: bool) -> None:
        super().__init__()
        self.heads = shape.num_attention_heads
        self.head_size = shape.hidden_size // shape.num_attention_heads
        source = shape.encoder_width if cross else shape.hidden_size
        self.query = nn.Linear(shape.hidden_size, shape.hidden_size)
        self.key = nn.Linear(source, shape.hidden_size)
        self.value = nn.Linear(source, shape.hidden_size)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.heads, self.head_size).permute(0, 2, 1, 3)

    def forward(self, hidden: torch.Tensor, source: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        key, value = self.split(self.key(source)), self.split(self.value(source))
        query = self.split(self.query(hidden))
        scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(self.head_size) + mask
        context = torch.matmul(nn.Softmax(dim=-1)(scores), value).permute(0, 2, 1, 3).contiguous()
        return context.view(*context.shape[:-2], self.heads * self.head_size)


class Attention(nn.Module):
    def __init__(self, shape: QFormerShape, cross: bool) -> None:
        super().__init__()
        self.self = SelfAttention(shape, cross)
        self.output = SelfOutput(shape.hidden_size, shape)

    def forward(self, hidden: torch.Tensor, source: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.output(self.self(hidden, source, mask), hidden)
        return out


class Layer(nn.Module):
    """``BertLayer``: self-attention over queries and text, cross-attention to the vision features for
    the queries (every ``cross_attention_freq``-th layer), then each part through its own feed-forward."""

    def __init__(self, shape: QFormerShape, index: int) -> None:
        super().__init__()
        self.attention = Attention(shape, cross=False)
        self.has_cross_attention = index % shape.cross_attention_freq == 0
        if self.has_cross_attention:
            self.crossattention = Attention(shape, cross=True)
        self.intermediate = Intermediate(shape)
        self.output = SelfOutput(shape.intermediate_size, shape)
        self.intermediate_query = Intermediate(shape)
        self.output_query = SelfOutput(shape.intermediate_size, shape)

    def forward(
        self,
        hidden: torch.Tensor,
        mask: torch.Tensor,
        vision: torch.Tensor,
        vision_mask: torch.Tensor,
        queries: int,
    ) -> torch.Tensor:
        attended = self.attention(hidden, hidden, mask)
        query = attended[:, :queries]
        if self.has_cross_attention:
            query = self.crossattention(query, vision, vision_mask)
        out = self.output_query(self.intermediate_query(query), query)
        if attended.shape[1] > queries:
            text = attended[:, queries:]
            out = torch.cat([out, self.output(self.intermediate(text), text)], dim=1)
        return out


class Embeddings(nn.Module):
    def __init__(self, shape: QFormerShape) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(
            shape.vocab_size, shape.hidden_size, padding_idx=shape.pad_token_id
        )
        self.position_embeddings = nn.Embedding(shape.max_position_embeddings, shape.hidden_size)
        self.LayerNorm = nn.LayerNorm(shape.hidden_size, eps=shape.layer_norm_eps)

    def forward(self, ids: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)[None]
        text = self.word_embeddings(ids) + self.position_embeddings(positions)
        out: torch.Tensor = self.LayerNorm(torch.cat((queries, text), dim=1))
        return out


class Encoder(nn.Module):
    def __init__(self, shape: QFormerShape) -> None:
        super().__init__()
        self.layer = nn.ModuleList([Layer(shape, i) for i in range(shape.num_hidden_layers)])


class Bert(nn.Module):
    """``BertModel(add_pooling_layer=False)`` of ``qformer.py``, its forward for query embeddings and text."""

    def __init__(self, shape: QFormerShape) -> None:
        super().__init__()
        self.embeddings = Embeddings(shape)
        self.encoder = Encoder(shape)

    def forward(
        self, ids: torch.Tensor, mask: torch.Tensor, queries: torch.Tensor, vision: torch.Tensor
    ) -> torch.Tensor:
        """The last hidden state of ``queries`` and the text ``ids`` (mask over both) reading ``vision``:
        the masks as ``get_extended_attention_mask`` (``-10000`` where masked) and
        ``invert_attention_mask`` (the dtype's minimum) make them; the vision mask is all ones."""
        hidden = self.embeddings(ids, queries)
        extended = (1.0 - mask[:, None, None, :].to(hidden.dtype)) * -10000.0
        vision_mask = torch.ones(vision.shape[:-1], dtype=hidden.dtype, device=vision.device)
        vision_extended = (1.0 - vision_mask[:, None, None, :]) * torch.finfo(hidden.dtype).min
        for layer in self.encoder.layer:
            hidden = layer(hidden, extended, vision, vision_extended, queries.shape[1])
        return hidden


class QFormer(nn.Module):
    """``vlm_att_encoder``: the ``BertLMHeadModel`` whose ``cls`` head ``init_bert`` drops."""

    def __init__(self, shape: QFormerShape) -> None:
        super().__init__()
        self.bert = Bert(shape)


class LlamaVidForCausalLM(LlamaForCausalLM):
    """The language model, projector and attention modules of a LLaMA-VID checkpoint;
    ``attach_vision`` adds the EVA tower. The Q-Former's shape is not in the checkpoint's config: the
    loader puts it there as ``qformer_shape`` (:meth:`QFormerShape.from_bert_config`)."""

    vision_tower: EvaViT

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        qformer = QFormerShape(**config.qformer_shape)
        bert_type = str(getattr(config, "bert_type", "qformer"))
        if "qformer" not in bert_type or "layer" in bert_type:
            raise AdapterError(f"bert_type {bert_type!r}: the kit ports the qformer ones of all BERT layers")
        width, hidden = int(config.mm_hidden_size), config.hidden_size
        att_width = QFORMER_WIDTH if "pretrain" in bert_type else width
        model: Any = self.model
        model.mm_projector = build_projector(config)
        model.vlm_att_encoder = QFormer(qformer)
        model.vlm_att_query = nn.Parameter(torch.zeros(1, int(config.num_query), qformer.hidden_size))
        model.vlm_att_projector = nn.Linear(qformer.hidden_size, width)
        model.vlm_att_key_projector = nn.Linear(width, width)
        model.vlm_att_val_projector = nn.Linear(width, hidden)
        model.vlm_att_bert_proj = (
            nn.Linear(width, att_width) if "pretrain" in bert_type and width != att_width else None
        )
        model.vlm_att_ln = nn.LayerNorm(att_width) if "pretrain" in bert_type else None

    @property
    def compress(self) -> str | None:
        return getattr(self.config, "compress_type", None)

    def attach_vision(self, shape: EvaShape, image_size: int, eva_state: dict[str, torch.Tensor]) -> None:
        """``EVAVisionTowerLavis.load_model``: the ViT at the image processor's size, the saved position
        embeddings interpolated to it, ``load_state_dict(strict=False)``."""
        tower = EvaViT(shape, image_size)
        state = dict(eva_state)
        if "pos_embed" in state:
            state["pos_embed"] = interpolated_pos_embed(state["pos_embed"], tower.patch_embed.num_patches)
        tower.load_state_dict(state, strict=False)
        self.vision_tower = tower.to(device=self.device, dtype=self.dtype)

    def frame_tokens(
        self, pixels: torch.Tensor, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor
    ) -> torch.Tensor:
        """``encode_images`` and ``vlm_attention`` for one sample's frames and one prompt: its tokens,
        two per frame in frame order (context, content)."""
        model: Any = self.model
        features = self.vision_tower(pixels.to(device=self.device, dtype=self.dtype))
        frames = features.shape[0]
        ids, mask = prompt_ids.expand(frames, -1), prompt_mask.expand(frames, -1)
        bert_in = model.vlm_att_bert_proj(features) if model.vlm_att_bert_proj is not None else features
        patches = (
            features[:, 1:]
            if str(self.config.mm_vision_select_feature) == "patch" and features.shape[1] % 2
            else features
        )
        queries = model.vlm_att_query.expand(frames, -1, -1)
        vision = model.vlm_att_ln(bert_in) if model.vlm_att_ln is not None else bert_in
        full_mask = torch.cat(
            [torch.ones(queries.shape[:-1], dtype=mask.dtype, device=mask.device), mask], dim=1
        )
        out = model.vlm_att_encoder.bert(ids, full_mask, queries, vision)[:, : queries.shape[1]]
        text_q = model.vlm_att_projector(out)
        return self.token_generation(text_q, patches).flatten(0, 1)

    def token_generation(self, text_q: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
        """``token_generation``: the context token (queries' attention over the patches, averaged over the
        queries, ``vlm_att_val_projector``) and the content tokens (patches pooled, ``mm_projector``)."""
        model: Any = self.model
        scores = text_q @ model.vlm_att_key_projector(patches).transpose(-1, -2) / (patches.shape[-1] ** 0.5)
        context = model.vlm_att_val_projector(((scores.softmax(-1) @ patches).mean(1))[:, None])
        compress = self.compress
        content = patches
        if compress is not None and "grid" in compress:
            grid = int(compress.split("grid:")[-1])
            side = int(patches.shape[1] ** 0.5)
            stride = side // grid
            square = patches.reshape(patches.shape[0], side, side, -1).permute(0, 3, 1, 2)
            pooled = nn.functional.avg_pool2d(square, padding=0, kernel_size=stride, stride=stride)
            content = pooled.permute(0, 2, 3, 1).flatten(1, 2)
        elif compress is not None and "mean" in compress:
            content = patches.mean(dim=1, keepdim=True)
        return torch.cat([context, model.mm_projector(content)], dim=1)

    def multimodal_embeds(
        self,
        ids: torch.Tensor,
        pixels: torch.Tensor | None,
        prompt_ids: torch.Tensor,
        prompt_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Input embeddings of one sample's ids (1-D): the text around its one image id embedded piece by
        piece, the image id replaced by every frame's two tokens."""
        embed: Any = self.get_input_embeddings()
        places = (ids == IMAGE_TOKEN_INDEX).nonzero().flatten().tolist()
        if not places:
            return embed(ids)
        if len(places) != 1 or pixels is None:
            raise AdapterError(
                f"{len(places)} image ids and {0 if pixels is None else len(pixels)} frames: "
                "LLaMA-VID's video input takes one image id for all frames"
            )
        (place,) = places
        tokens = self.frame_tokens(pixels, prompt_ids, prompt_mask)
        pieces = [embed(ids[:place]), tokens]
        if place + 1 < ids.shape[0]:
            pieces.append(embed(ids[place + 1 :]))
        return torch.cat(pieces)
