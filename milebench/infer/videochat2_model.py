"""VideoChat2's model as its original code computes it at inference (github.com/OpenGVLab/Ask-Anything,
``video_chat2/models``: ``videochat2_it.py``, ``blip2/vit.py``, ``blip2/Qformer.py``, ``blip2/blip2.py``),
over transformers' Llama.

``VideoChat2_it.encode_img`` for a picture (a one-frame input, ``use_image``) or a video (``T`` frames): the
UMT-L ViT (``PretrainVisionTransformer``: a Conv3d patch embedding with tubelet 1, the fixed sine-cosine
table of one frame, or for a video the table ``Chat.upload_video`` sets, ``depth + return_index + 1`` blocks,
no final norm as ``build_vit`` builds it), ``vision_layernorm`` over every frame's patches,
then the Q-Former with 32 query tokens and 64 ``extra_query_tokens`` read together with the instruction's
BERT ids (``qformer_text_input``: the queries and the text share each self-attention; cross-attention and
the query feed-forward act on the queries, the text feed-forward on the text), and ``llama_proj`` of the 96
query outputs. The language model carries peft's LoRA on ``q_proj`` and ``v_proj``, applied unmerged as
peft 0.3.0 applies it (the layer's output plus ``B(A(x)) * lora_alpha / r``). The kit keeps the original's
module names, so its checkpoints load key for key as its ``load_state_dict(strict=False)`` loads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import LlamaForCausalLM

from milebench.infer.adapter import AdapterError
from milebench.infer.cheetor_model import QAttention, QFormerShape, QIntermediate, QOutput, load_parts

LORA_PREFIX = "llama_model.base_model.model."
"""Where peft's wrapper puts the language model's own names in the checkpoint."""
LORA_KEY = re.compile(r"^(?P<target>.+)\.lora_(?P<half>[AB])(?:\.default)?\.weight$")
"""A LoRA half: ``<module>.lora_A.default.weight`` (peft 0.3.0's names) or without the adapter name."""
CHECKPOINT_FRAMES = 4
"""``Chat.get_sinusoid_encoding_table``'s ``ckpt_num_frame``: the frames the video table is made for before
it is resized to a video's frame count (its ``pre_n_position`` 784, four frames of 14 x 14 patches)."""


@dataclass(frozen=True)
class UmtShape:
    """``config.vision_encoder`` of ``configs/config.json`` (the demo's) and ``scripts/config_7b_stage3.py``:
    UMT-L at 224 px with 16 px patches, 24 layers of width 1024 and 16 heads, ``return_index`` -2; the
    blocks' LayerNorm eps 1e-6 and ``mlp_ratio`` 4 are ``PretrainVisionTransformer``'s defaults."""

    image_size: int = 224
    patch_size: int = 16
    embed_dim: int = 1024
    depth: int = 24
    num_heads: int = 16
    mlp_ratio: float = 4.0
    return_index: int = -2

    @property
    def blocks(self) -> int:
        """``PretrainVisionTransformerEncoder``: ``self.depth = depth + return_index + 1``."""
        return self.depth + self.return_index + 1

    @property
    def patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class VideoChat2Shape:
    """What the original's configs and code fix: the ViT, the Q-Former (``bert-base-uncased``'s config with
    its word embeddings resized to the BERT tokenizer with ``[DEC]`` added, 30523), ``num_query_token`` 32,
    ``extra_num_query_token`` 64, and the LoRA the demo wraps the language model in (r 16, alpha 32 on
    ``q_proj`` and ``v_proj``, peft's targets for Llama)."""

    vit: UmtShape = field(default_factory=UmtShape)
    qformer: QFormerShape = field(default_factory=QFormerShape)
    qformer_vocab: int = 30523
    qformer_positions: int = 512
    num_query_token: int = 32
    extra_num_query_token: int = 64
    lora_r: int = 16
    lora_alpha: int = 32
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")

    @property
    def features_per_image(self) -> int:
        """``encode_img``: ``llama_proj`` of every query output, the extra queries included."""
        return self.num_query_token + self.extra_num_query_token

    @property
    def feature_source(self) -> str:
        return f"{self.num_query_token} + {self.extra_num_query_token} extra Q-Former queries"

    @property
    def image_size(self) -> int:
        return self.vit.image_size


def sinusoid_table(positions: int, width: int) -> torch.Tensor:
    """``vit.get_sinusoid_encoding_table`` without interpolation, computed as it computes it (numpy
    float64, then float32)."""
    exponent = np.array([2 * (j // 2) / width for j in range(width)])
    table = np.array([[pos / np.power(10000, e) for e in exponent] for pos in range(positions)])
    table[:, 0::2] = np.sin(table[:, 0::2])
    table[:, 1::2] = np.cos(table[:, 1::2])
    return torch.tensor(table, dtype=torch.float).unsqueeze(0)


def along_time(table: torch.Tensor, frames: int) -> torch.Tensor:
    """``Chat.get_sinusoid_encoding_table`` as ``Chat.upload_video`` calls it for ``frames`` frames, from
    ``table``, the table of ``CHECKPOINT_FRAMES`` frames (``sinusoid_table`` of their positions): resized
    along time to ``frames`` by linear interpolation (each patch position's values over the frames). Its
    spatial resizing never runs: the upload asks for the model's own grid (``(224 // 16) ** 2`` positions a
    frame)."""
    if frames == CHECKPOINT_FRAMES:
        return table
    width = table.shape[-1]
    patches = table.shape[1] // CHECKPOINT_FRAMES
    table = table.reshape(-1, CHECKPOINT_FRAMES, patches, width).permute(0, 2, 3, 1)
    table = table.reshape(-1, width, CHECKPOINT_FRAMES)
    table = nn.functional.interpolate(table, size=frames, mode="linear")
    return table.reshape(1, patches, width, frames).permute(0, 3, 1, 2).flatten(1, 2)


class UmtAttention(nn.Module):
    """``vit.Attention``: one bias-free ``qkv`` with ``q_bias`` and ``v_bias`` (no key bias), scaled
    queries."""

    def __init__(self, shape: UmtShape) -> None:
        super().__init__()
        self.heads = shape.num_heads
        self.scale = (shape.embed_dim // shape.num_heads) ** -0.5
        self.qkv = nn.Linear(shape.embed_dim, shape.embed_dim * 3, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(shape.embed_dim))
        self.v_bias = nn.Parameter(torch.zeros(shape.embed_dim))
        self.proj = nn.Linear(shape.embed_dim, shape.embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias), self.v_bias))
        qkv = nn.functional.linear(x, self.qkv.weight, bias)
        q, k, v = qkv.reshape(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        out: torch.Tensor = self.proj((attn @ v).transpose(1, 2).reshape(batch, length, -1))
        return out


class UmtMlp(nn.Module):
    def __init__(self, shape: UmtShape) -> None:
        super().__init__()
        hidden = int(shape.embed_dim * shape.mlp_ratio)
        self.fc1 = nn.Linear(shape.embed_dim, hidden)
        self.fc2 = nn.Linear(hidden, shape.embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc2(nn.functional.gelu(self.fc1(x)))
        return out


class UmtBlock(nn.Module):
    """``vit.Block`` with ``init_values`` 0 (no layer scale)."""

    def __init__(self, shape: UmtShape) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(shape.embed_dim, eps=1e-6)
        self.attn = UmtAttention(shape)
        self.norm2 = nn.LayerNorm(shape.embed_dim, eps=1e-6)
        self.mlp = UmtMlp(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        out: torch.Tensor = x + self.mlp(self.norm2(x))
        return out


class UmtPatchEmbed(nn.Module):
    def __init__(self, shape: UmtShape) -> None:
        super().__init__()
        size = (1, shape.patch_size, shape.patch_size)
        self.proj = nn.Conv3d(3, shape.embed_dim, kernel_size=size, stride=size)


class UmtEncoder(nn.Module):
    """``PretrainVisionTransformerEncoder`` on pictures (``use_image``: the one-frame table
    ``img_pos_embed``) and on videos (``pos_embed`` as ``Chat.upload_video`` sets it for the frame
    count)."""

    def __init__(self, shape: UmtShape) -> None:
        super().__init__()
        self.shape = shape
        self.patch_embed = UmtPatchEmbed(shape)
        self.blocks = nn.ModuleList(UmtBlock(shape) for _ in range(shape.blocks))
        self.register_buffer(
            "img_pos_embed", sinusoid_table(shape.patches, shape.embed_dim), persistent=False
        )
        self.video_tables: dict[int, torch.Tensor] = {}

    def pos_table(self, frames: int = 1) -> torch.Tensor:
        """``img_pos_embed`` for one frame (``encode_img``'s ``use_image`` is ``T == 1``), else the video
        table of ``frames`` frames (the four-frame table made once, each count's resizing once)."""
        table = self.img_pos_embed
        assert isinstance(table, torch.Tensor)
        if frames == 1:
            return table
        if frames not in self.video_tables:
            if CHECKPOINT_FRAMES not in self.video_tables:
                four = sinusoid_table(CHECKPOINT_FRAMES * self.shape.patches, self.shape.embed_dim)
                self.video_tables[CHECKPOINT_FRAMES] = four
            self.video_tables[frames] = along_time(self.video_tables[CHECKPOINT_FRAMES], frames)
        return self.video_tables[frames].to(table.device)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """``frames``: (batch, 3, time, H, W); returns (batch, time * patches, width)."""
        x = self.patch_embed.proj(frames).flatten(2).transpose(1, 2)
        x = x + self.pos_table(frames.shape[2]).type_as(x)
        for block in self.blocks:
            x = block(x)
        return x


class UmtViT(nn.Module):
    """``PretrainVisionTransformer``: its ``encoder`` (the checkpoint's ``vision_encoder.encoder.*``)."""

    def __init__(self, shape: UmtShape) -> None:
        super().__init__()
        self.encoder = UmtEncoder(shape)


class TextQEmbeddings(nn.Module):
    """``BertEmbeddings``: the text's word and absolute position embeddings after the queries, one
    LayerNorm over both."""

    def __init__(self, shape: VideoChat2Shape) -> None:
        super().__init__()
        width = shape.qformer.hidden_size
        self.word_embeddings = nn.Embedding(shape.qformer_vocab, width)
        self.position_embeddings = nn.Embedding(shape.qformer_positions, width)
        self.LayerNorm = nn.LayerNorm(width, eps=shape.qformer.layer_norm_eps)

    def forward(self, ids: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)[None]
        text = self.word_embeddings(ids) + self.position_embeddings(positions)
        out: torch.Tensor = self.LayerNorm(torch.cat((queries, text), dim=1))
        return out


class TextQLayer(nn.Module):
    """``BertLayer`` with ``query_length`` queries before the text: self-attention over both,
    cross-attention (every ``cross_attention_freq``-th layer) and ``intermediate_query``/``output_query`` on
    the queries, ``intermediate``/``output`` on the text."""

    def __init__(self, shape: QFormerShape, index: int, encoder_width: int) -> None:
        super().__init__()
        self.attention = QAttention(shape, shape.hidden_size)
        self.crossattention = (
            QAttention(shape, encoder_width) if index % shape.cross_attention_freq == 0 else None
        )
        self.intermediate = QIntermediate(shape)
        self.output = QOutput(shape, shape.intermediate_size)
        self.intermediate_query = QIntermediate(shape)
        self.output_query = QOutput(shape, shape.intermediate_size)

    def forward(self, x: torch.Tensor, features: torch.Tensor, queries: int) -> torch.Tensor:
        x = self.attention(x, x)
        query = x[:, :queries]
        if self.crossattention is not None:
            query = self.crossattention(query, features)
        query = self.output_query(self.intermediate_query(query), query)
        text = x[:, queries:]
        if text.shape[1] == 0:
            return query
        return torch.cat([query, self.output(self.intermediate(text), text)], dim=1)


class TextQEncoder(nn.Module):
    def __init__(self, shape: QFormerShape, encoder_width: int) -> None:
        super().__init__()
        self.layer = nn.ModuleList(
            TextQLayer(shape, i, encoder_width) for i in range(shape.num_hidden_layers)
        )


class TextQBert(nn.Module):
    """``Qformer.bert`` called with the instruction's ids and ``query_embeds`` (every mask all ones)."""

    def __init__(self, shape: VideoChat2Shape) -> None:
        super().__init__()
        self.embeddings = TextQEmbeddings(shape)
        self.encoder = TextQEncoder(shape.qformer, shape.vit.embed_dim)

    def forward(self, ids: torch.Tensor, queries: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(ids, queries)
        for layer in self.encoder.layer:
            x = layer(x, features, queries.shape[1])
        return x


class TextQFormer(nn.Module):
    """``BertLMHeadModel`` as ``VideoChat2_it`` keeps it (``cls`` set to None)."""

    def __init__(self, shape: VideoChat2Shape) -> None:
        super().__init__()
        self.bert = TextQBert(shape)


class VideoChat2(nn.Module):
    """The vision encoder, ``vision_layernorm``, Q-Former, query and extra query tokens, ``llama_proj`` and
    the language model with its LoRA pairs."""

    def __init__(self, shape: VideoChat2Shape, llama: LlamaForCausalLM) -> None:
        super().__init__()
        self.shape = shape
        width = shape.qformer.hidden_size
        self.vision_encoder = UmtViT(shape.vit)
        self.vision_layernorm = nn.LayerNorm(shape.vit.embed_dim, eps=1e-12)
        self.qformer = TextQFormer(shape)
        self.query_tokens = nn.Parameter(torch.zeros(1, shape.num_query_token, width))
        self.extra_query_tokens = nn.Parameter(torch.zeros(1, shape.extra_num_query_token, width))
        self.llama_model = llama
        self.llama_proj = nn.Linear(width, llama.config.hidden_size)
        self.lora = nn.ModuleDict()

    def load_parts(self, state: dict[str, torch.Tensor], source: str) -> list[str]:
        """One of the original's ``load_state_dict(strict=False)`` loads over the peft-wrapped model: the
        language model's names under peft's prefix, its LoRA halves, every other key the model has."""
        lora = {k: v for k, v in state.items() if k.startswith(LORA_PREFIX) and LORA_KEY.match(k)}
        llama = {
            k.removeprefix(LORA_PREFIX): v
            for k, v in state.items()
            if k.startswith(LORA_PREFIX) and k not in lora
        }
        rest = {k: v for k, v in state.items() if not k.startswith(LORA_PREFIX)}
        used = load_parts(self, rest, source)
        own = self.llama_model.state_dict()
        for key, value in llama.items():
            if key in own:
                if own[key].shape != value.shape:
                    raise AdapterError(f"{source}: {LORA_PREFIX}{key} has shape {tuple(value.shape)}")
                own[key].copy_(value)
                used.append(LORA_PREFIX + key)
        used += self.load_lora(lora, source)
        return used

    def load_lora(self, state: dict[str, torch.Tensor], source: str) -> list[str]:
        """Each targeted projection's LoRA pair, added to its output as peft 0.3.0's unmerged ``Linear``
        adds it: ``x`` in the pair's dtype, ``B(A(x)) * lora_alpha / r`` (dropout is off at inference)."""
        modules = dict(self.llama_model.named_modules())
        used = []
        for key, value in state.items():
            match = LORA_KEY.match(key)
            assert match is not None
            target = match["target"].removeprefix(LORA_PREFIX)
            if target.rsplit(".", 1)[-1] not in self.shape.lora_targets or target not in modules:
                continue
            name = target.replace(".", "/")
            if name not in self.lora:
                self.lora[name] = LoraPair(modules[target], self.shape.lora_alpha / self.shape.lora_r)
            pair = self.lora[name]
            assert isinstance(pair, LoraPair)
            pair.set(match["half"], value, f"{source}: {key}")
            used.append(key)
        for name, pair in self.lora.items():
            assert isinstance(pair, LoraPair)
            if not pair.complete:
                raise AdapterError(f"{source}: the LoRA pair of {name.replace('/', '.')} lacks a half")
        return used

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        embed: Any = self.llama_model.get_input_embeddings()
        out: torch.Tensor = embed(ids)
        return out

    def encode_img(self, pixels: torch.Tensor, instruction: torch.Tensor) -> torch.Tensor:
        """``encode_img`` of ``T`` frames (T, 3, H, W), one picture a one-frame input, with the
        instruction's BERT ids: ViT, ``vision_layernorm``, the Q-Former over the 96 queries and the text,
        ``llama_proj`` of the query outputs."""
        device = self.llama_proj.weight.device
        frames = pixels.to(device).permute(1, 0, 2, 3)[None]
        features = self.vision_layernorm(self.vision_encoder.encoder(frames))
        queries = torch.cat([self.query_tokens, self.extra_query_tokens], dim=1)
        output = self.qformer.bert(instruction.to(device)[None], queries, features)
        projected: torch.Tensor = self.llama_proj(output[:, : queries.shape[1]])[0]
        return projected

    def context_embeds(
        self, chunks: list[torch.Tensor], visuals: list[torch.Tensor], instruction: torch.Tensor
    ) -> torch.Tensor:
        """``Chat.get_context_emb`` for one sample: each chunk's ids embedded, one upload's projected
        queries between two chunks, each upload (a picture as one frame, as ``Chat.upload_img`` gives it,
        or a video's frames, as ``Chat.upload_video``) encoded on its own."""
        if len(visuals) != len(chunks) - 1:
            raise AdapterError(f"{len(chunks) - 1} image placeholders but {len(visuals)} pictures")
        pieces: list[torch.Tensor] = []
        for chunk, picture in zip(chunks[:-1], visuals, strict=True):
            pieces += [self.embed_tokens(chunk), self.encode_img(picture, instruction)]
        pieces.append(self.embed_tokens(chunks[-1]))
        return torch.cat([piece.to(pieces[0].dtype) for piece in pieces])


class LoraPair(nn.Module):
    """One projection's ``lora_A`` and ``lora_B``, added to the projection's output by a forward hook."""

    def __init__(self, target: nn.Module, scaling: float) -> None:
        super().__init__()
        self.scaling = scaling
        self.lora_A: nn.Linear | None = None
        self.lora_B: nn.Linear | None = None
        target.register_forward_hook(self.add)

    @property
    def complete(self) -> bool:
        return self.lora_A is not None and self.lora_B is not None

    def set(self, half: str, weight: torch.Tensor, source: str) -> None:
        if weight.dim() != 2:
            raise AdapterError(f"{source} has shape {tuple(weight.shape)}, not a matrix")
        layer = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
        layer.weight.data.copy_(weight)
        if half == "A":
            self.lora_A = layer
        else:
            self.lora_B = layer

    def add(self, module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> torch.Tensor:
        if self.lora_A is None or self.lora_B is None:
            return output
        x = inputs[0].to(self.lora_A.weight.dtype)
        return (output + self.lora_B(self.lora_A(x)) * self.scaling).to(output.dtype)
