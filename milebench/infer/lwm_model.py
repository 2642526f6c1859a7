"""LWM's inference path in torch, read from the original checkpoint's files (github.com/LargeWorldModel/LWM
at 59d4dbe, a JAX code base): ``lwm/vqgan.py``'s encoder and quantizer, which turn a frame into 256 codes,
and ``lwm/vision_llama.py``'s ``FlaxVideoLLaMAForCausalLM`` with ``sample_mode='text'``: a LLaMA whose
input embedding is the vision table ``vte`` where the vision mask is set and the text table ``wte``
elsewhere, and whose logits are ``lm_head``'s (text).

The files as the original reads them: ``params``, tux's streaming msgpack (one ``(key path, flax bytes)``
pair per tensor, the layers stacked along axis 0 as ``scan_layers=True`` saves them); ``vqgan``, a pickle of
the VQGAN's parameter tree (numpy arrays); the LLaMA config as ``VideoLLaMAConfig`` writes it (the
original's ``load_llama_config='json::...'``). JAX's rotary embedding rotates adjacent pairs of a head's
dimensions where transformers' Llama rotates its two halves: the query and key projections are read with
their output rows reordered, which leaves every attention score as it was.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

FRAME_SIZE = 256
"""``_read_process_vision``: every frame resized and centre-cropped to 256 x 256."""
CODES_PER_FRAME = 256
EOF = 8192
"""``_read_process_vision``'s token after a frame that is not the last of its encoding batch; its batches
are one frame each (``B = 1``), so the chat path never writes it."""
EOV = 8193
"""The token after the last frame of an encoding batch: after every frame in the chat path."""
VISION_START = "<vision>"
VISION_END = "</vision>"
GROUPS = 32
"""flax's ``GroupNorm`` default group count."""
NORM_EPS = 1e-6
"""flax's ``GroupNorm`` default epsilon."""
NDARRAY_EXT = 1
"""flax.serialization's msgpack extension code of an ndarray: ``(shape, dtype name, bytes)``."""
VQGAN_DEFAULTS: dict[str, Any] = {
    "resolution": 256,
    "num_channels": 3,
    "hidden_channels": 128,
    "channel_mult": [1, 2, 2, 4, 6],
    "num_res_blocks": 2,
    "attn_resolutions": [],
    "no_attn_mid_block": True,
    "z_channels": 64,
    "num_embeddings": 8192,
    "quantized_embed_dim": 64,
}
"""``VQGANConfig``'s defaults: the only sizes the original's ``VQGAN`` class builds."""


class LwmFileError(ValueError):
    """A checkpoint file that is not what the original code reads."""


def process_frame(image: Image.Image, size: int = FRAME_SIZE) -> np.ndarray:
    """``Sampler._process_frame``: the short side resized to ``size``, the centre cropped, in [-1, 1]."""
    width, height = image.size
    if width < height:
        new_width, new_height = size, int(size * height / width)
    else:
        new_width, new_height = int(size * width / height), size
    image = image.resize((new_width, new_height))
    left, top = (new_width - size) / 2, (new_height - size) / 2
    image = image.crop((left, top, (new_width + size) / 2, (new_height + size) / 2))
    frame: np.ndarray = np.array(image, dtype=np.float32) / 127.5 - 1
    return frame


def vision_tokens(codes: list[list[int]]) -> list[int]:
    """``_read_process_vision``'s tokens of one vision: each frame's codes closed by ``<eov>``, since its
    loop encodes one frame per batch (``B = 1``) and each is the last of its batch (a video's frames too)."""
    out: list[int] = []
    for frame in codes:
        out += [*frame, EOV]
    return out


def _unpack(data: bytes) -> Any:
    import msgpack

    def ext(code: int, payload: bytes) -> Any:
        if code != NDARRAY_EXT:
            raise LwmFileError(f"msgpack extension {code}, not flax's ndarray")
        shape, dtype, raw = msgpack.unpackb(payload, raw=False)
        return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape)

    return msgpack.unpackb(data, ext_hook=ext, raw=False)


def read_streaming_params(path: Path) -> dict[tuple[str, ...], np.ndarray]:
    """The tensors of a tux streaming checkpoint (``StreamingCheckpointer.load_checkpoint``), by key path."""
    try:
        import msgpack
    except ImportError as err:
        raise LwmFileError("reading LWM's params needs msgpack: pip install -e '.[lwm]'") from err
    out: dict[tuple[str, ...], np.ndarray] = {}
    with path.open("rb") as fin:
        try:
            for key, value in msgpack.Unpacker(fin, raw=False, max_buffer_size=0):
                out[tuple(key)] = np.asarray(_unpack(value))
        except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as err:
            raise LwmFileError(f"{path}: not a tux streaming checkpoint ({err})") from None
    return out


def write_streaming_params(params: Mapping[tuple[str, ...], np.ndarray], path: Path) -> None:
    """``StreamingCheckpointer.save_train_state_to_file`` of flat params (float32 kept)."""
    import msgpack

    def ndarray(value: np.ndarray) -> bytes:
        arr = np.ascontiguousarray(value)
        inner = msgpack.packb((arr.shape, arr.dtype.name, arr.tobytes("C")), use_bin_type=True)
        return bytes(msgpack.packb(msgpack.ExtType(NDARRAY_EXT, inner), use_bin_type=True))

    packer = msgpack.Packer(use_bin_type=True)
    with path.open("wb") as fout:
        for key, value in params.items():
            fout.write(packer.pack((list(key), ndarray(value))))


class _NumpyOnly(pickle.Unpickler):
    """Unpickles a parameter tree of numpy arrays and nothing else."""

    ALLOWED: ClassVar[frozenset[tuple[str, str]]] = frozenset(
        {
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"),
            ("collections", "OrderedDict"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise LwmFileError(f"the vqgan pickle holds {module}.{name}, not a tree of numpy arrays")
        return super().find_class(module, name)


def read_vqgan(path: Path) -> dict[str, Any]:
    """The VQGAN's parameter tree as ``VQGAN.__init__`` unpickles it (numpy arrays only are accepted)."""
    try:
        tree = _NumpyOnly(io.BytesIO(path.read_bytes())).load()
    except (pickle.UnpicklingError, EOFError, AttributeError) as err:
        raise LwmFileError(f"{path}: not a pickled VQGAN parameter tree ({err})") from None
    if not isinstance(tree, dict) or "encoder" not in tree:
        raise LwmFileError(f"{path}: a pickle without the VQGAN's encoder parameters")
    return tree


def _t(value: Any) -> torch.Tensor:
    return torch.from_numpy(np.array(value, dtype=np.float32))


@dataclass(frozen=True)
class VqganShape:
    """The sizes ``VQGANConfig`` gives the encoder and quantizer."""

    hidden_channels: int
    channel_mult: tuple[int, ...]
    num_res_blocks: int
    z_channels: int
    num_embeddings: int
    quantized_embed_dim: int
    resolution: int

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> VqganShape:
        merged = {**VQGAN_DEFAULTS, **config}
        if merged["attn_resolutions"] or not merged["no_attn_mid_block"]:
            raise LwmFileError(
                "a VQGAN with attention blocks: the released VQGAN (and the kit's port) has none"
            )
        return cls(
            hidden_channels=int(merged["hidden_channels"]),
            channel_mult=tuple(int(m) for m in merged["channel_mult"]),
            num_res_blocks=int(merged["num_res_blocks"]),
            z_channels=int(merged["z_channels"]),
            num_embeddings=int(merged["num_embeddings"]),
            quantized_embed_dim=int(merged["quantized_embed_dim"]),
            resolution=int(merged["resolution"]),
        )


class VqganEncoder:
    """``VQGANModel.encode``: encoder, ``quant_conv`` and the nearest codebook entry of each position,
    run on the flax parameter tree (NHWC kernels turned to torch's layout once)."""

    def __init__(self, shape: VqganShape, tree: Mapping[str, Any]) -> None:
        self.shape = shape
        self.weights = dict(_flat(tree))
        self.codebook = self._get("quantize/embeddings")

    def to(self, device: torch.device) -> VqganEncoder:
        self.weights = {name: value.to(device) for name, value in self.weights.items()}
        self.codebook = self._get("quantize/embeddings")
        return self

    @property
    def device(self) -> torch.device:
        return self.codebook.device

    def _get(self, name: str) -> torch.Tensor:
        try:
            return self.weights[name]
        except KeyError:
            raise LwmFileError(f"the VQGAN parameters lack {name}") from None

    def _conv(self, x: torch.Tensor, name: str, stride: int = 1, same: bool = True) -> torch.Tensor:
        kernel = self._get(f"{name}/kernel").permute(3, 2, 0, 1)
        pad = kernel.shape[-1] // 2 if same else 0
        return F.conv2d(x, kernel, self._get(f"{name}/bias"), stride=stride, padding=pad)

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.group_norm(x, GROUPS, self._get(f"{name}/scale"), self._get(f"{name}/bias"), eps=NORM_EPS)

    def _resnet(self, x: torch.Tensor, name: str, out_channels: int) -> torch.Tensor:
        h = self._conv(F.silu(self._norm(x, f"{name}/GroupNorm_0")), f"{name}/Conv_0")
        h = self._conv(F.silu(self._norm(h, f"{name}/GroupNorm_1")), f"{name}/Conv_1")
        residual = x if out_channels == x.shape[1] else self._conv(x, f"{name}/Conv_2")
        return h + residual

    def codes(self, frames: torch.Tensor) -> torch.Tensor:
        """Codebook indices ``(frames, side, side)`` of frames ``(frames, 256, 256, 3)`` in [-1, 1]."""
        s = self.shape
        x = self._conv(frames.permute(0, 3, 1, 2), "encoder/Conv_0")
        for level, mult in enumerate(s.channel_mult):
            block = f"encoder/DownsamplingBlock_{level}"
            for n in range(s.num_res_blocks):
                x = self._resnet(x, f"{block}/ResnetBlock_{n}", s.hidden_channels * mult)
            if level != len(s.channel_mult) - 1:
                x = self._conv(F.pad(x, (0, 1, 0, 1)), f"{block}/Downsample_0/Conv_0", stride=2, same=False)
        for n in range(2):
            x = self._resnet(x, f"encoder/MidBlock_0/ResnetBlock_{n}", x.shape[1])
        x = self._conv(F.silu(self._norm(x, "encoder/GroupNorm_0")), "encoder/Conv_1")
        z = self._conv(x, "quant_conv").permute(0, 2, 3, 1)
        flat = z.reshape(-1, z.shape[-1])
        codebook = self.codebook
        distance = (
            (flat**2).sum(dim=1, keepdim=True)
            + (codebook.T**2).sum(dim=0, keepdim=True)
            - 2 * flat @ codebook.T
        )
        return distance.argmin(dim=1).reshape(z.shape[:-1])


def _flat(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flat(value, f"{name}/")
        else:
            yield name, _t(value)


def llama_config(lwm: Mapping[str, Any], bos_id: int, eos_id: int) -> LlamaConfig:
    """transformers' Llama config of a ``VideoLLaMAConfig`` (its ``theta`` is the rotary base; the keyword
    ``rope_theta`` is read by transformers 4.37 and 5 alike)."""
    fields: dict[str, Any] = {
        "vocab_size": int(lwm["vocab_size"]),
        "hidden_size": int(lwm["hidden_size"]),
        "intermediate_size": int(lwm["intermediate_size"]),
        "num_hidden_layers": int(lwm["num_hidden_layers"]),
        "num_attention_heads": int(lwm["num_attention_heads"]),
        "num_key_value_heads": int(lwm["num_attention_heads"]),
        "max_position_embeddings": int(lwm["max_sequence_length"]),
        "rms_norm_eps": float(lwm["rms_norm_eps"]),
        "rope_theta": float(lwm.get("theta", 10000)),
        "tie_word_embeddings": bool(lwm.get("tie_word_embeddings", False)),
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "pad_token_id": 0,
    }
    return LlamaConfig(**fields)


class LwmForCausalLM(LlamaForCausalLM):
    """transformers' Llama with LWM's second input table ``vte``, chosen per position by the vision mask."""

    def __init__(self, config: LlamaConfig, vision_vocab_size: int) -> None:
        super().__init__(config)
        self.vte = nn.Embedding(vision_vocab_size, config.hidden_size)

    def multimodal_embeds(self, ids: torch.Tensor, vision_mask: torch.Tensor) -> torch.Tensor:
        """``FlaxVideoLLaMAModule``'s input: ``vte`` of the vision positions, ``wte`` of the rest."""
        text = self.get_input_embeddings()(torch.where(vision_mask, 0, ids))
        vision = self.vte(torch.where(vision_mask, ids, 0))
        return torch.where(vision_mask[..., None], vision, text)


def _rotary_rows(heads: int, head_dim: int) -> torch.Tensor:
    """Output rows of a query or key projection in transformers' rotary order: each head's even
    dimensions, then its odd ones."""
    within = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    return torch.cat([h * head_dim + within for h in range(heads)])


LAYER_NAMES = {
    ("attention", "wq"): "self_attn.q_proj",
    ("attention", "wk"): "self_attn.k_proj",
    ("attention", "wv"): "self_attn.v_proj",
    ("attention", "wo"): "self_attn.o_proj",
    ("feed_forward", "w1"): "mlp.gate_proj",
    ("feed_forward", "w2"): "mlp.down_proj",
    ("feed_forward", "w3"): "mlp.up_proj",
    ("attention_norm",): "input_layernorm",
    ("ffn_norm",): "post_attention_layernorm",
}
"""``FlaxLLaMABlock``'s modules and transformers' Llama layer's."""


def state_dict(params: Mapping[tuple[str, ...], np.ndarray], config: LlamaConfig) -> dict[str, torch.Tensor]:
    """``LwmForCausalLM``'s weights from the streaming params of a ``scan_layers`` checkpoint."""
    heads = int(config.num_attention_heads)
    rows = _rotary_rows(heads, int(config.hidden_size) // heads)
    scan = ("transformer", "h", "scan_decoder")
    out = {
        "model.embed_tokens.weight": _t(params[("transformer", "wte", "embedding")]),
        "vte.weight": _t(params[("transformer", "vte", "embedding")]),
        "model.norm.weight": _t(params[("transformer", "ln_f", "kernel")]),
        "lm_head.weight": _t(params[("lm_head", "kernel")]).T,
    }
    for part, name in LAYER_NAMES.items():
        stacked = _t(params[(*scan, *part, "kernel")])
        if stacked.shape[0] != config.num_hidden_layers:
            layers = config.num_hidden_layers
            raise LwmFileError(
                f"{'/'.join(part)}: {stacked.shape[0]} layers stacked, the config has {layers}"
            )
        for layer, value in enumerate(stacked):
            weight = value if value.dim() == 1 else value.T
            if part[-1] in ("wq", "wk"):
                weight = weight[rows]
            out[f"model.layers.{layer}.{name}.weight"] = weight.contiguous()
    return out
