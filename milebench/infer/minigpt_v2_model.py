"""MiniGPT-v2's model as its original code computes it at inference (github.com/Vision-CAIR/MiniGPT-4,
``minigpt4/models``), over transformers' Llama.

The original assembles three parts (``MiniGPTv2.from_config``): the EVA ViT-g of ``eva_vit.py``
(``create_eva_vit_g``: 14-px patches, width 1408, 39 blocks, 16 heads, MLP ratio 4.3637, q and v biases,
no final norm; the 224-px weights ``eva_vit_g.pth`` with their position embeddings interpolated bicubically
to the image size), a fresh ``ln_vision`` LayerNorm, the Llama-2 chat model with peft LoRA on ``q_proj``
and ``v_proj``, and ``llama_proj`` (a Linear over four concatenated patch features); then the MiniGPT-v2
checkpoint (``ckpt``: ``llama_proj`` and the LoRA weights) is loaded over it with ``strict=False``. peft
0.2.0 merges each LoRA pair into its weight when the model is put in eval mode (``W += B @ A * alpha / r``,
in the weight's dtype), so the kit merges it the same way at load. No library in the kit's stack holds
this ViT under these names, so :class:`EvaViT` is written here, key for key as ``eva_vit.py`` names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import LlamaForCausalLM

from milebench.infer.adapter import AdapterError


@dataclass(frozen=True)
class EvaShape:
    """The ViT's sizes: ``create_eva_vit_g``'s constants, or a tiny checkpoint's."""

    embed_dim: int = 1408
    depth: int = 39
    num_heads: int = 16
    mlp_ratio: float = 4.3637
    patch_size: int = 14


@dataclass(frozen=True)
class MiniGPTv2Shape:
    """What the original's config and code fix: the ViT, the image size (``image_size`` 448 of
    ``minigpt_v2.yaml`` and of its ``blip2_image_eval`` processor) and the LoRA (``lora_r`` 64,
    ``lora_alpha`` 16 of the eval configs, targets ``q_proj``, ``v_proj``)."""

    eva: EvaShape = EvaShape()
    image_size: int = 448
    lora_r: int = 64
    lora_alpha: int = 16
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")

    @property
    def patches(self) -> int:
        return (self.image_size // self.eva.patch_size) ** 2

    @property
    def features_per_image(self) -> int:
        """``encode_img``: the patch features (CLS dropped), four concatenated per language-model token."""
        return self.patches // 4


class EvaAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.num_heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.v_bias = nn.Parameter(torch.zeros(dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, n, _ = x.shape
        bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias), self.v_bias))
        qkv = nn.functional.linear(x, self.qkv.weight, bias)
        q, k, v = qkv.reshape(batch, n, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        out: torch.Tensor = self.proj((attn @ v).transpose(1, 2).reshape(batch, n, -1))
        return out


class EvaMlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc2(self.act(self.fc1(x)))
        return out


class EvaBlock(nn.Module):
    def __init__(self, shape: EvaShape) -> None:
        super().__init__()
        dim = shape.embed_dim
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = EvaAttention(dim, shape.num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = EvaMlp(dim, int(dim * shape.mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, shape: EvaShape, image_size: int) -> None:
        super().__init__()
        self.num_patches = (image_size // shape.patch_size) ** 2
        self.proj = nn.Conv2d(3, shape.embed_dim, kernel_size=shape.patch_size, stride=shape.patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.proj(x).flatten(2).transpose(1, 2)
        return out


class EvaViT(nn.Module):
    """``eva_vit.VisionTransformer`` as ``create_eva_vit_g`` configures it (no relative position bias, no
    layer scale, no drop path at inference); ``forward`` is its ``forward_features``."""

    def __init__(self, shape: EvaShape, image_size: int) -> None:
        super().__init__()
        self.num_features = shape.embed_dim
        self.patch_embed = PatchEmbed(shape, image_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, shape.embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, shape.embed_dim))
        self.blocks = nn.ModuleList([EvaBlock(shape) for _ in range(shape.depth)])

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(pixels)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return x


def interpolated_pos_embed(saved: torch.Tensor, num_patches: int) -> torch.Tensor:
    """``eva_vit.interpolate_pos_embed``: the patch positions resized bicubically (in float32) to the
    model's grid, the CLS position kept; unchanged when the grids agree."""
    saved = saved.float()
    old, new = int((saved.shape[-2] - 1) ** 0.5), int(num_patches**0.5)
    if old == new:
        return saved
    width = saved.shape[-1]
    grid = saved[:, 1:].reshape(-1, old, old, width).permute(0, 3, 1, 2)
    grid = nn.functional.interpolate(grid, size=(new, new), mode="bicubic", align_corners=False)
    return torch.cat((saved[:, :1], grid.permute(0, 2, 3, 1).flatten(1, 2)), dim=1)


def load_eva(vit: EvaViT, eva_state: dict[str, torch.Tensor]) -> None:
    """``create_eva_vit_g``'s load: position embeddings interpolated, ``strict=False``."""
    state = dict(eva_state)
    if "pos_embed" in state:
        state["pos_embed"] = interpolated_pos_embed(state["pos_embed"], vit.patch_embed.num_patches)
    vit.load_state_dict(state, strict=False)


LORA_KEY = "llama_model.base_model.model."
"""Where peft 0.2.0's wrapped Llama puts the language model's keys in the MiniGPT-v2 checkpoint."""


class MiniGPTv2(nn.Module):
    """The vision encoder, ``ln_vision``, ``llama_proj`` and the language model of one checkpoint."""

    def __init__(self, shape: MiniGPTv2Shape, llama: LlamaForCausalLM) -> None:
        super().__init__()
        self.shape = shape
        self.visual_encoder = EvaViT(shape.eva, shape.image_size)
        self.ln_vision = nn.LayerNorm(shape.eva.embed_dim)
        self.llama_proj = nn.Linear(shape.eva.embed_dim * 4, llama.config.hidden_size)
        self.llama_model = llama

    def load_vision(self, eva_state: dict[str, torch.Tensor]) -> None:
        load_eva(self.visual_encoder, eva_state)

    def load_checkpoint(self, state: dict[str, torch.Tensor]) -> list[str]:
        """The MiniGPT-v2 checkpoint over the assembled model, as ``load_state_dict(strict=False)`` loads
        it, the LoRA pairs merged as peft 0.2.0 merges them at ``eval()``; returns the keys it used."""
        used, lora = [], {}
        own = self.state_dict()
        for key, value in state.items():
            if ".lora_A." in key or ".lora_B." in key:
                lora[key] = value
                used.append(key)
            elif key.startswith(LORA_KEY) and key.removeprefix(LORA_KEY) in own:
                self.llama_model.state_dict()[key.removeprefix(LORA_KEY)].copy_(value)
                used.append(key)
            elif key in own:
                own[key].copy_(value)
                used.append(key)
        self.merge_lora(lora)
        return used

    def merge_lora(self, lora: dict[str, torch.Tensor]) -> None:
        """``W += (B @ A) * lora_alpha / lora_r`` for each targeted projection with both halves saved."""
        scaling = self.shape.lora_alpha / self.shape.lora_r
        weights = self.llama_model.state_dict()
        for key_a, a in lora.items():
            if ".lora_A." not in key_a:
                continue
            key_b = key_a.replace(".lora_A.", ".lora_B.")
            if key_b not in lora:
                raise AdapterError(f"checkpoint has {key_a} without {key_b}")
            target = key_a.removeprefix(LORA_KEY).replace(".lora_A.weight", ".weight")
            if target not in weights:
                raise AdapterError(f"checkpoint's {key_a}: the language model has no {target}")
            weight = weights[target]
            weight += (lora[key_b].to(torch.float32) @ a.to(torch.float32)).to(weight.dtype) * scaling

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        embed: Any = self.llama_model.get_input_embeddings()
        out: torch.Tensor = embed(ids)
        return out

    def encode_img(self, pixels: torch.Tensor) -> torch.Tensor:
        """``MiniGPTv2.encode_img``: ViT, ``ln_vision`` (in float32, as its LayerNorm subclass computes),
        the CLS feature dropped, four neighbouring patch features concatenated, ``llama_proj``. On a GPU
        the dtypes meet under autocast, as the original's ``maybe_autocast``."""
        features = self.visual_encoder(pixels.to(self.llama_proj.weight.device))
        features = self.ln_vision(features.float()).to(features.dtype)[:, 1:, :]
        batch, patches, width = features.shape
        grouped = features.reshape(batch, patches // 4, width * 4)
        projected: torch.Tensor = self.llama_proj(grouped)
        return projected

    def context_embeds(self, chunks: list[torch.Tensor], pixels: torch.Tensor | None) -> torch.Tensor:
        """``get_context_emb``: each chunk's ids embedded, one picture's features between two chunks."""
        if len(chunks) == 1:
            return self.embed_tokens(chunks[0])
        if pixels is None or pixels.shape[0] != len(chunks) - 1:
            got = 0 if pixels is None else pixels.shape[0]
            raise AdapterError(f"{len(chunks) - 1} image placeholders but {got} pictures")
        pictures = self.encode_img(pixels)
        pieces: list[torch.Tensor] = []
        for chunk, picture in zip(chunks[:-1], pictures, strict=True):
            pieces += [self.embed_tokens(chunk), picture]
        pieces.append(self.embed_tokens(chunks[-1]))
        return torch.cat(pieces)
