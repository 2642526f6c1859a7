"""Cheetor's model as its original code computes it at inference (github.com/DCDmllm/Cheetah,
``Cheetah/cheetah/models``: ``cheetah_llama2.py``, ``blip2.py``, ``Qformer.py``, ``modeling_llama2.py``), over
transformers' Llama.

``Cheetah_Llama2`` is BLIP-2's pipeline in front of Llama-2-chat: the EVA ViT-g (``eva_vit.py``, the same
file as MiniGPT-4's, so the kit's :class:`EvaViT`), ``ln_vision``, the Q-Former of ``Qformer.py`` (LAVIS's
BERT with cross-attention every ``cross_attention_freq`` layers, only its query path kept: no word or
position embeddings, no text feed-forward), 32 query tokens and ``llama_proj``; each picture becomes the
Q-Former's 32 outputs, projected. Its VPG-C lives in the Llama (``modeling_llama2.LlamaModel.forward``):
on the prompt's pass, before decoder layer ``update_layer`` (16), the hidden state at the prompt's last
position is projected (``qformer_proj``) and added to a second set of query tokens, the Q-Former runs again
with these queries over each picture's ViT features, and its outputs, projected (``llm_proj``), are added to
that picture's positions. The kit keeps the original's module names (``llama_model.model.Qformer`` is the
same Q-Former), so a checkpoint loads key for key as its ``load_state_dict(strict=False)`` loads it, and
runs VPG-C as a one-shot hook on that layer, armed for each ``generate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import LlamaForCausalLM

from milebench.infer.adapter import AdapterError
from milebench.infer.minigpt_v2_model import EvaShape, EvaViT, load_eva


@dataclass(frozen=True)
class QFormerShape:
    """``BertConfig.from_pretrained("bert-base-uncased")`` as ``Blip2Base.init_Qformer`` amends it
    (``cross_attention_freq`` 2), or a tiny checkpoint's sizes."""

    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    layer_norm_eps: float = 1e-12
    cross_attention_freq: int = 2


@dataclass(frozen=True)
class CheetorShape:
    """What the original's configs and code fix: the ViT, ``image_size`` 224 (``cheetah_llama2.yaml`` and
    its ``blip2_image_eval``), the Q-Former, ``num_query_token`` 32 and VPG-C's ``update_layer`` 16 (the
    default of ``Chat.batch_answer``, which passes it to ``generate``)."""

    eva: EvaShape = field(default_factory=EvaShape)
    image_size: int = 224
    qformer: QFormerShape = field(default_factory=QFormerShape)
    num_query_token: int = 32
    update_layer: int = 16

    @property
    def features_per_image(self) -> int:
        """``encode_img``: one language-model token per query."""
        return self.num_query_token

    @property
    def feature_source(self) -> str:
        return f"{self.num_query_token} Q-Former queries"


class QSelfAttention(nn.Module):
    """``BertSelfAttention``: keys and values from the queries or (cross) from the picture's features."""

    def __init__(self, shape: QFormerShape, key_width: int) -> None:
        super().__init__()
        self.heads = shape.num_attention_heads
        self.head_size = shape.hidden_size // shape.num_attention_heads
        self.query = nn.Linear(shape.hidden_size, shape.hidden_size)
        self.key = nn.Linear(key_width, shape.hidden_size)
        self.value = nn.Linear(key_width, shape.hidden_size)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.heads, self.head_size).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        key, value, query = (
            self.split(self.key(context)),
            self.split(self.value(context)),
            self.split(self.query(x)),
        )
        # The original adds an all-zero mask here (every query and every feature attended), which changes
        # no value.
        scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(self.head_size)
        out = torch.matmul(scores.softmax(dim=-1), value).permute(0, 2, 1, 3).contiguous()
        return out.view(*out.shape[:-2], -1)


class QOutput(nn.Module):
    """``BertSelfOutput`` / ``BertOutput``: dense, then LayerNorm over the residual sum."""

    def __init__(self, shape: QFormerShape, width: int) -> None:
        super().__init__()
        self.dense = nn.Linear(width, shape.hidden_size)
        self.LayerNorm = nn.LayerNorm(shape.hidden_size, eps=shape.layer_norm_eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.LayerNorm(self.dense(x) + residual)
        return out


class QAttention(nn.Module):
    def __init__(self, shape: QFormerShape, key_width: int) -> None:
        super().__init__()
        self.self = QSelfAttention(shape, key_width)
        self.output = QOutput(shape, shape.hidden_size)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.output(self.self(x, context), x)
        return out


class QIntermediate(nn.Module):
    def __init__(self, shape: QFormerShape) -> None:
        super().__init__()
        self.dense = nn.Linear(shape.hidden_size, shape.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.dense(x))


class QLayer(nn.Module):
    """``BertLayer`` on queries alone: self-attention, cross-attention on every ``cross_attention_freq``-th
    layer, the query feed-forward (``intermediate_query``, ``output_query``)."""

    def __init__(self, shape: QFormerShape, index: int, encoder_width: int) -> None:
        super().__init__()
        self.attention = QAttention(shape, shape.hidden_size)
        self.crossattention = (
            QAttention(shape, encoder_width) if index % shape.cross_attention_freq == 0 else None
        )
        self.intermediate_query = QIntermediate(shape)
        self.output_query = QOutput(shape, shape.intermediate_size)

    def forward(self, x: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        x = self.attention(x, x)
        if self.crossattention is not None:
            x = self.crossattention(x, features)
        out: torch.Tensor = self.output_query(self.intermediate_query(x), x)
        return out


class QEmbeddings(nn.Module):
    def __init__(self, shape: QFormerShape) -> None:
        super().__init__()
        self.LayerNorm = nn.LayerNorm(shape.hidden_size, eps=shape.layer_norm_eps)


class QEncoder(nn.Module):
    def __init__(self, shape: QFormerShape, encoder_width: int) -> None:
        super().__init__()
        self.layer = nn.ModuleList(QLayer(shape, i, encoder_width) for i in range(shape.num_hidden_layers))


class QBert(nn.Module):
    """``Qformer.bert`` called with ``query_embeds`` only: the queries' LayerNorm, then every layer."""

    def __init__(self, shape: QFormerShape, encoder_width: int) -> None:
        super().__init__()
        self.embeddings = QEmbeddings(shape)
        self.encoder = QEncoder(shape, encoder_width)

    def forward(self, queries: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        x: torch.Tensor = self.embeddings.LayerNorm(queries)
        for layer in self.encoder.layer:
            x = layer(x, features)
        return x


class QFormer(nn.Module):
    """``BertLMHeadModel`` as ``Cheetah_Llama2`` keeps it (its head and text parts set to None)."""

    def __init__(self, shape: QFormerShape, encoder_width: int) -> None:
        super().__init__()
        self.bert = QBert(shape, encoder_width)


def load_parts(model: nn.Module, state: dict[str, torch.Tensor], source: str) -> list[str]:
    """One of the original's ``load_state_dict(strict=False)`` loads: every key the model has, in the
    file's order (the Q-Former's two names are one module); returns the keys used."""
    try:
        result = model.load_state_dict(state, strict=False)
    except RuntimeError as err:
        raise AdapterError(f"{source} does not fit the model: {err}") from err
    unexpected = set(result.unexpected_keys)
    return [key for key in state if key not in unexpected]


@dataclass
class Vpg:
    """What VPG-C reads on the prompt's pass: each picture's ViT features (after ``ln_vision``), where
    each picture's tokens are, and the prompt's length (its last position guides the queries)."""

    features: list[torch.Tensor]
    spans: list[tuple[int, int]]
    length: int


class Cheetor(nn.Module):
    """The vision encoder, ``ln_vision``, Q-Former, query tokens, ``llama_proj`` and the language model with
    VPG-C's parts (``llama_model.model.{Qformer, qformer_proj, llm_proj, query_tokens}``)."""

    def __init__(self, shape: CheetorShape, llama: LlamaForCausalLM) -> None:
        super().__init__()
        self.shape = shape
        width, hidden = shape.qformer.hidden_size, llama.config.hidden_size
        self.visual_encoder = EvaViT(shape.eva, shape.image_size)
        self.ln_vision = nn.LayerNorm(shape.eva.embed_dim)
        self.Qformer = QFormer(shape.qformer, shape.eva.embed_dim)
        self.query_tokens = nn.Parameter(torch.zeros(1, shape.num_query_token, width))
        self.llama_model = llama
        self.llama_proj = nn.Linear(width, hidden)
        inner: Any = llama.model
        inner.Qformer = self.Qformer
        inner.qformer_proj = nn.Linear(hidden, width)
        inner.llm_proj = nn.Linear(width, hidden)
        inner.query_tokens = nn.Parameter(torch.zeros(1, shape.num_query_token, width))
        self.pending: Vpg | None = None
        layers = inner.layers
        if shape.update_layer < len(layers):
            layers[shape.update_layer].register_forward_pre_hook(self.vpg_hook, with_kwargs=True)

    def load_vision(self, eva_state: dict[str, torch.Tensor]) -> None:
        load_eva(self.visual_encoder, eva_state)

    def load_parts(self, state: dict[str, torch.Tensor], source: str) -> list[str]:
        return load_parts(self, state, source)

    def load_blip2_query_tokens(self, state: dict[str, torch.Tensor]) -> None:
        """``init_query_tokens_value``: every key holding ``query_tokens`` goes to VPG-C's query tokens."""
        for key, value in state.items():
            if "query_tokens" in key:
                self.load_parts({"llama_model.model.query_tokens": value}, "the BLIP-2 checkpoint")

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        embed: Any = self.llama_model.get_input_embeddings()
        out: torch.Tensor = embed(ids)
        return out

    def encode_img(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``encode_img``: ViT, ``ln_vision`` (in float32, as its LayerNorm subclass computes), the
        Q-Former over the features with the query tokens, ``llama_proj``; returns the projected queries
        and the features (VPG-C reads them again)."""
        features = self.visual_encoder(pixels.to(self.llama_proj.weight.device))
        features = self.ln_vision(features.float()).to(features.dtype)
        queries = self.query_tokens.expand(features.shape[0], -1, -1)
        projected: torch.Tensor = self.llama_proj(self.Qformer.bert(queries, features))
        return projected, features

    def context_embeds(
        self, chunks: list[torch.Tensor], pixels: torch.Tensor | None
    ) -> tuple[torch.Tensor, Vpg]:
        """``Chat.batch_get_context_emb`` for one sample: each chunk's ids embedded, one picture's queries
        between two chunks; and what VPG-C reads, the pictures' spans counted as it counts them."""
        got = 0 if pixels is None else pixels.shape[0]
        if got != len(chunks) - 1:
            raise AdapterError(f"{len(chunks) - 1} image placeholders but {got} pictures")
        pieces: list[torch.Tensor] = []
        spans: list[tuple[int, int]] = []
        features: list[torch.Tensor] = []
        if pixels is not None and got:
            pictures, vit = self.encode_img(pixels)
            features = [f[None] for f in vit]
            start = 0
            for chunk, picture in zip(chunks[:-1], pictures, strict=True):
                pieces += [self.embed_tokens(chunk), picture]
                start += chunk.shape[0]
                spans.append((start, start + picture.shape[0]))
                start += picture.shape[0]
        pieces.append(self.embed_tokens(chunks[-1]))
        embeds = torch.cat(pieces)
        return embeds, Vpg(features=features, spans=spans, length=embeds.shape[0])

    def arm(self, vpg: Vpg) -> None:
        """VPG-C for the next prompt pass (the next ``generate``)."""
        self.pending = vpg

    def disarm(self) -> None:
        self.pending = None

    def vpg_hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Before layer ``update_layer`` on the prompt's pass (``past_key_values is None`` there): the
        pictures' positions get the Q-Former's outputs for queries guided by the last position."""
        vpg, self.pending = self.pending, None
        if vpg is None:
            return None
        hidden = args[0] if args else kwargs["hidden_states"]
        if hidden.shape[1] != vpg.length:
            raise AdapterError(f"VPG-C expected the prompt's {vpg.length} positions, got {hidden.shape[1]}")
        inner: Any = self.llama_model.model
        guide = inner.qformer_proj(hidden[:, vpg.length - 1][:, None])
        queries = guide + inner.query_tokens
        updated = hidden.clone()
        for features, (start, end) in zip(vpg.features, vpg.spans, strict=True):
            out = inner.llm_proj(self.Qformer.bert(queries, features)[:, : queries.shape[1]])
            updated[:, start:end] += out
        if args:
            return (updated, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": updated}
