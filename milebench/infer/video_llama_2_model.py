"""Video-LLaMA-2's vision-language branch as its original code computes it at inference
(github.com/DAMO-NLP-SG/Video-LLaMA, ``video_llama/models/video_llama.py``: ``encode_videoQformer_visual``),
over transformers' Llama.

A video (or a picture, a one-frame video) goes through BLIP-2's pipeline frame by frame: the EVA ViT-g
(``eva_vit.py``, MiniGPT-4's, so the kit's :class:`EvaViT`), ``ln_vision`` and the image Q-Former with its 32
query tokens (``Qformer.py``, LAVIS's BERT, cross-attention every second layer: Cheetor's :class:`QFormer`).
Each frame's query outputs get that frame's position embedding (``video_frame_position_embedding``, up to
``max_frame_pos`` frames), all frames' queries are read by the video Q-Former (two layers, cross-attention
in each, over the image Q-Former's width) with 32 video query tokens, and ``llama_proj`` maps its outputs
to the language model: 32 tokens per video. The kit keeps the original's module names, so the BLIP-2 file
and the VL checkpoint load key for key as its ``load_state_dict(strict=False)`` loads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import LlamaForCausalLM

from milebench.infer.adapter import AdapterError
from milebench.infer.cheetor_model import QFormer, QFormerShape, load_parts
from milebench.infer.minigpt_v2_model import EvaShape, EvaViT, load_eva


@dataclass(frozen=True)
class VideoLlamaShape:
    """What the original's configs and code fix: the ViT, ``image_size`` 224
    (``configs/models/video_llama.yaml`` and the ``Blip2ImageEvalProcessor()`` default ``Chat.upload_img``
    uses), the image Q-Former
    (``bert-base-uncased``, ``cross_attention_freq`` 2) with ``num_query_token`` 32, the video Q-Former
    (``init_video_Qformer``: two layers, ``cross_attention_freq`` 1), ``num_video_query_token`` 32 and
    ``max_frame_pos`` 32 (``eval_configs/video_llama_eval_only_vl.yaml``)."""

    eva: EvaShape = field(default_factory=EvaShape)
    image_size: int = 224
    qformer: QFormerShape = field(default_factory=QFormerShape)
    num_query_token: int = 32
    video_qformer: QFormerShape = field(
        default_factory=lambda: QFormerShape(num_hidden_layers=2, cross_attention_freq=1)
    )
    num_video_query_token: int = 32
    max_frame_pos: int = 32

    @property
    def features_per_image(self) -> int:
        """``encode_videoQformer_visual``: one language-model token per video query."""
        return self.num_video_query_token

    @property
    def feature_source(self) -> str:
        return f"{self.num_video_query_token} video Q-Former queries"


class VideoLlama(nn.Module):
    """The vision encoder, ``ln_vision``, image Q-Former and its query tokens, the frame position embedding,
    the video Q-Former and its query tokens, ``llama_proj`` and the language model."""

    def __init__(self, shape: VideoLlamaShape, llama: LlamaForCausalLM) -> None:
        super().__init__()
        self.shape = shape
        width = shape.qformer.hidden_size
        self.visual_encoder = EvaViT(shape.eva, shape.image_size)
        self.ln_vision = nn.LayerNorm(shape.eva.embed_dim)
        self.Qformer = QFormer(shape.qformer, shape.eva.embed_dim)
        self.query_tokens = nn.Parameter(torch.zeros(1, shape.num_query_token, width))
        self.llama_model = llama
        self.llama_proj = nn.Linear(width, llama.config.hidden_size)
        self.video_frame_position_embedding = nn.Embedding(shape.max_frame_pos, width)
        self.video_Qformer = QFormer(shape.video_qformer, width)
        self.video_query_tokens = nn.Parameter(
            torch.zeros(1, shape.num_video_query_token, shape.video_qformer.hidden_size)
        )

    def load_vision(self, eva_state: dict[str, torch.Tensor]) -> None:
        load_eva(self.visual_encoder, eva_state)

    def load_parts(self, state: dict[str, torch.Tensor], source: str) -> list[str]:
        return load_parts(self, state, source)

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        embed: Any = self.llama_model.get_input_embeddings()
        out: torch.Tensor = embed(ids)
        return out

    def encode_video(self, frames: torch.Tensor) -> torch.Tensor:
        """``encode_videoQformer_visual`` for one video of shape (frames, 3, H, W): ViT, ``ln_vision`` (in
        float32, as its LayerNorm subclass computes), the image Q-Former per frame, each frame's position
        embedding added, the video Q-Former over all frames' queries, ``llama_proj``."""
        count = frames.shape[0]
        if count > self.shape.max_frame_pos:
            raise AdapterError(f"{count} frames, but the frame positions end at {self.shape.max_frame_pos}")
        features = self.visual_encoder(frames.to(self.llama_proj.weight.device))
        features = self.ln_vision(features.float()).to(features.dtype)
        queries = self.Qformer.bert(self.query_tokens.expand(count, -1, -1), features)
        positions = torch.arange(count, dtype=torch.long, device=queries.device)
        framed = queries + self.video_frame_position_embedding(positions)[:, None]
        video = self.video_Qformer.bert(self.video_query_tokens, framed.reshape(1, -1, framed.shape[-1]))
        projected: torch.Tensor = self.llama_proj(video)[0]
        return projected

    def context_embeds(self, chunks: list[torch.Tensor], videos: list[torch.Tensor]) -> torch.Tensor:
        """``Chat.get_context_emb`` for one sample: each chunk's ids embedded, one video's (or picture's)
        projected queries between two chunks, each video encoded on its own as ``Chat.upload_img`` does."""
        if len(videos) != len(chunks) - 1:
            raise AdapterError(f"{len(chunks) - 1} image placeholders but {len(videos)} pictures")
        pieces: list[torch.Tensor] = []
        for chunk, video in zip(chunks[:-1], videos, strict=True):
            pieces += [self.embed_tokens(chunk), self.encode_video(video)]
        pieces.append(self.embed_tokens(chunks[-1]))
        return torch.cat([piece.to(pieces[0].dtype) for piece in pieces])
