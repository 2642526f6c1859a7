"""A tiny random-weight Video-LLaMA-2 (its vision-language branch) in the layout its original code loads
(github.com/DAMO-NLP-SG/Video-LLaMA), so the hf-video-llama-2 adapter loads it as it loads the real parts.

The folder is the ``llama_model`` folder (a Llama from transformers' ``LlamaConfig`` with the tiny
MiniGPT-v2's SentencePiece tokenizer files, as Llama-2-chat's) and beside it the three files the original
reads elsewhere: ``eva_vit_g.pth`` (the ViT's state dict at 224 px, the size ``Chat.upload_img`` resizes
to, with large patches so the grid stays small), ``blip2_pretrained_flant5xxl.pth`` (``{"model": ...}``: the
image Q-Former under ``Qformer.bert.`` with one of the text parts the original drops, ``query_tokens`` and
``ln_vision``, as LAVIS's BLIP-2 checkpoint names them) and ``VL_LLaMA_2_7B_Finetuned.pth`` (``{"model":
...}``: ``llama_proj``, the video Q-Former, its query tokens and the frame position embedding, as the
``ckpt`` of ``eval_configs/video_llama_eval_only_vl.yaml``). ``video_llama_2.json`` holds the sizes the
original hard-codes (the ViT-g, ``bert-base-uncased``'s config) or takes from its configs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import torch

from milebench.infer.cheetor_model import QFormer, QFormerShape
from milebench.infer.minigpt_v2_model import EvaShape, EvaViT
from milebench.infer.tiny import HIDDEN, tiny_shape
from milebench.infer.tiny_cheetor import BLIP2_FILE, TINY_QFORMER, perturbed
from milebench.infer.tiny_minigpt_v2 import EVA_FILE, TINY_EVA, write_tiny_llama
from milebench.infer.video_llama_2_model import VideoLlamaShape
from milebench.spec.model import ModelSpec

SHAPE_FILE = "video_llama_2.json"
CHECKPOINT_FILE = "VL_LLaMA_2_7B_Finetuned.pth"
TINY_PATCH = 56
"""Four patches a side at 224 px."""
TINY_IMAGE_QUERIES = 8
"""The image Q-Former's queries, fewer than the video Q-Former's so the two are told apart."""


def tiny_video_llama_shape(n_tokens_per_image: int) -> VideoLlamaShape:
    return VideoLlamaShape(
        eva=replace(TINY_EVA, patch_size=TINY_PATCH),
        qformer=TINY_QFORMER,
        num_query_token=TINY_IMAGE_QUERIES,
        video_qformer=replace(TINY_QFORMER, cross_attention_freq=1),
        num_video_query_token=n_tokens_per_image,
    )


def build_tiny_video_llama_2(spec: ModelSpec, out_dir: Path) -> None:
    """Write the tiny Video-LLaMA-2 of ``spec`` into ``out_dir``."""
    shape = tiny_shape(spec, "video-llama-2")
    model = tiny_video_llama_shape(shape.n_tokens_per_image)
    write_tiny_llama(shape, out_dir)
    torch.save(perturbed(EvaViT(model.eva, model.image_size)), out_dir / EVA_FILE)
    width, embed_dim = model.qformer.hidden_size, model.eva.embed_dim
    qformer = {f"Qformer.{k}": v for k, v in perturbed(QFormer(model.qformer, embed_dim)).items()}
    blip2 = {
        **qformer,
        "Qformer.bert.embeddings.word_embeddings.weight": torch.randn(64, width) * 0.02,
        "query_tokens": torch.randn(1, model.num_query_token, width) * 0.5,
        "ln_vision.weight": 1 + torch.randn(embed_dim) * 0.1,
        "ln_vision.bias": torch.randn(embed_dim) * 0.1,
    }
    torch.save({"model": blip2}, out_dir / BLIP2_FILE)
    video = perturbed(QFormer(model.video_qformer, width))
    state = {
        "llama_proj.weight": torch.randn(HIDDEN, width) * 0.1,
        "llama_proj.bias": torch.randn(HIDDEN) * 0.02,
        **{f"video_Qformer.{k}": v for k, v in video.items()},
        "video_query_tokens": torch.randn(1, model.num_video_query_token, width) * 0.5,
        "video_frame_position_embedding.weight": torch.randn(model.max_frame_pos, width) * 0.5,
    }
    torch.save({"model": state}, out_dir / CHECKPOINT_FILE)
    (out_dir / SHAPE_FILE).write_text(json.dumps(asdict(model), indent=2) + "\n", encoding="utf-8")


def read_shape(folder: Path) -> VideoLlamaShape:
    """The sizes a tiny checkpoint states; the real model's are the original's constants."""
    path = folder / SHAPE_FILE
    if not path.is_file():
        return VideoLlamaShape()
    saved = json.loads(path.read_text(encoding="utf-8"))
    return VideoLlamaShape(
        eva=EvaShape(**saved["eva"]),
        image_size=saved["image_size"],
        qformer=QFormerShape(**saved["qformer"]),
        num_query_token=saved["num_query_token"],
        video_qformer=QFormerShape(**saved["video_qformer"]),
        num_video_query_token=saved["num_video_query_token"],
        max_frame_pos=saved["max_frame_pos"],
    )
