"""What the LAVIS-derived original code bases (MiniGPT-4, Cheetah, Video-LLaMA) read from the network or
build at full size, replaced for a tiny checkpoint: the EVA ViT-g built at the checkpoint's sizes from its
local ``eva_vit_g.pth``, BERT's config at its Q-Former's sizes, and the language model loaded in float32.

Not a kit module: the original-code drivers import it in their own environments (torch only), each putting
this folder at the end of the import path.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch


def tiny_eva_vit_g(eva_vit: Any, eva: dict[str, Any], model_dir: Path) -> Callable[..., Any]:
    """``create_eva_vit_g`` of the original's ``eva_vit`` module with the tiny ViT's sizes and local weights:
    the same class, position interpolation, non-strict load and fp16 choice."""

    def create_eva_vit_g(
        img_size: int = 224,
        drop_path_rate: float = 0.4,
        use_checkpoint: bool = False,
        precision: str = "fp16",
    ) -> Any:
        model = eva_vit.VisionTransformer(
            img_size=img_size,
            patch_size=eva["patch_size"],
            use_mean_pooling=False,
            embed_dim=eva["embed_dim"],
            depth=eva["depth"],
            num_heads=eva["num_heads"],
            mlp_ratio=eva["mlp_ratio"],
            qkv_bias=True,
            drop_path_rate=drop_path_rate,
            norm_layer=partial(torch.nn.LayerNorm, eps=1e-6),
            use_checkpoint=use_checkpoint,
        )
        state_dict = torch.load(model_dir / "eva_vit_g.pth", map_location="cpu")
        eva_vit.interpolate_pos_embed(model, state_dict)
        model.load_state_dict(state_dict, strict=False)
        if precision == "fp16":
            eva_vit.convert_weights_to_fp16(model)
        return model

    return create_eva_vit_g


def tiny_bert_config(bert_config: Any, qformer: dict[str, Any]) -> Any:
    """The original's ``BertConfig`` whose ``from_pretrained("bert-base-uncased")`` gives the tiny
    Q-Former's sizes instead of the hub's."""

    class TinyBertConfig(bert_config):
        @classmethod
        def from_pretrained(cls, *args: Any, **kwargs: Any) -> Any:
            return bert_config(
                hidden_size=qformer["hidden_size"],
                num_hidden_layers=qformer["num_hidden_layers"],
                num_attention_heads=qformer["num_attention_heads"],
                intermediate_size=qformer["intermediate_size"],
                layer_norm_eps=qformer["layer_norm_eps"],
            )

    return TinyBertConfig


def load_in_float32(llama_class: Any) -> None:
    """The original's ``LlamaForCausalLM.from_pretrained`` loads in float32 whatever dtype it is asked for."""
    loader = llama_class.from_pretrained

    def in_float32(*args: Any, **kwargs: Any) -> Any:
        return loader(*args, **{**kwargs, "torch_dtype": torch.float32})

    llama_class.from_pretrained = in_float32
