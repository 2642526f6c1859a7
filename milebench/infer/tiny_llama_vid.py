"""A tiny random-weight LLaMA-VID in the layout its original code loads (github.com/dvlab-research/LLaMA-VID,
``llamavid/model/builder.py``), so the hf-llama-vid adapter loads it as it loads the real parts.

The folder is the checkpoint (``model_path``) as the original reads it: ``config.json`` of model type
``llava`` with LLaMA-VID's keys (``bert_type: qformer_pretrain``, ``compress_type: mean``, ``num_query``,
``mm_vision_tower``, ``image_processor``), a Llama with ``model.mm_projector`` and ``model.vlm_att_*`` in
a ``.bin`` shard with its ``pytorch_model.bin.index.json`` (``initialize_attention_modules`` reads the
attention modules through that index), and Llama-2's tokenizer files (the SentencePiece model the
original's slow tokenizer reads, and the ``tokenizer.json`` transformers converts from it, with BOS).
Beside them, at the relative paths the config names (the original resolves them against its working
directory, the checkpoint's folder here):
the EVA ViT's state dict ``model_zoo/LAVIS/eva_vit_g.pth`` with ``llama_vid_eva.json`` holding its tiny
sizes (the original hard-codes ViT-g's), the image processor folder, and ``bert-base-uncased/`` (the
BERT config and a WordPiece vocabulary of the corpus), which ``init_bert`` loads by that name. Its
weights file holds no tensors: the Q-Former's weights are the checkpoint's ``vlm_att_encoder``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import torch
from transformers import AutoTokenizer, CLIPImageProcessor, CLIPVisionConfig

from milebench.infer.llama_vid_model import QFORMER_WIDTH, LlamaVidForCausalLM, QFormerShape
from milebench.infer.minigpt_v2_model import EvaShape
from milebench.infer.tiny import CORPUS, HEADS, HIDDEN, LAYERS, tiny_shape
from milebench.infer.tiny_minigpt_v2 import (
    TINY_EVA,
    TOKENIZER_MODEL,
    tiny_eva,
    tiny_llama_config,
    train_sentencepiece,
)
from milebench.spec.model import ModelSpec

EVA_FILE = "model_zoo/LAVIS/eva_vit_g.pth"
"""``--vision_tower`` of LLaMA-VID's training scripts, which the released configs keep."""
EVA_SHAPE_FILE = "llama_vid_eva.json"
PROCESSOR_DIR = "llamavid/processor/clip-patch14-tiny"
"""Where ``image_processor`` points, as the released configs point into the code base's processor folder."""
BERT_DIR = "bert-base-uncased"
"""The name ``init_bert`` loads the BERT tokenizer and config by."""
SHARD = "pytorch_model-00001-of-00001.bin"
INDEX = "pytorch_model.bin.index.json"
IMAGE_SIZE = 56
"""4 x 4 patches of 14 pixels (and the CLS feature): odd, so ``vlm_attention`` drops the CLS one."""
NUM_QUERY = 4
BERT_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def bert_vocab() -> list[str]:
    """A WordPiece vocabulary: the special tokens, every character of the corpus alone and as a
    continuation, and its words (lower-cased and split at punctuation, as BERT's basic tokenizer does)."""
    text = " ".join(CORPUS).lower()
    chars = sorted({c for c in text if not c.isspace()})
    words = sorted({w for w in re.findall(r"[a-z0-9]+", text) if len(w) > 1})
    return [*BERT_SPECIAL, *chars, *(f"##{c}" for c in chars if c.isalnum()), *words]


def bert_config(vocab_size: int) -> dict[str, object]:
    """``bert-base-uncased``'s config.json keys, at tiny sizes."""
    return {
        "architectures": ["BertForMaskedLM"],
        "model_type": "bert",
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "intermediate_size": 2 * HIDDEN,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
    }


def llama_vid_keys(width: int) -> dict[str, object]:
    """The keys LLaMA-VID's training writes into the config (scripts/video/train/
    stage_1_2_full_v7b_224_fps_1.sh), with the tiny tower's width and query count."""
    return {
        "mm_vision_tower": f"./{EVA_FILE}",
        "image_processor": f"./{PROCESSOR_DIR}",
        "mm_hidden_size": width,
        "mm_projector_type": "mlp2x_gelu",
        "mm_vision_select_layer": -2,
        "mm_vision_select_feature": "patch",
        "mm_use_im_start_end": False,
        "mm_use_im_patch_token": False,
        "image_aspect_ratio": "pad",
        "bert_type": "qformer_pretrain",
        "num_query": NUM_QUERY,
        "compress_type": "mean",
        "max_token": 2048,
        "use_mm_proj": True,
        "tune_mm_mlp_adapter": False,
    }


def save_bert(out_dir: Path) -> int:
    """The ``bert-base-uncased`` folder: config, vocabulary, an empty weights file; the vocabulary size
    with the ``[DEC]`` token ``init_bert`` adds."""
    vocab = bert_vocab()
    folder = out_dir / BERT_DIR
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in vocab), encoding="utf-8")
    (folder / "config.json").write_text(
        json.dumps(bert_config(len(vocab)), indent=2) + "\n", encoding="utf-8"
    )
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"do_lower_case": True}) + "\n", encoding="utf-8"
    )
    torch.save({}, folder / "pytorch_model.bin")
    return len(vocab) + 1


def save_vision(out_dir: Path) -> None:
    """The EVA ViT's weights and tiny sizes, and the image processor folder (with the CLIP vision config
    ``EVAVisionTowerLavis`` also reads from it)."""
    eva = tiny_eva(IMAGE_SIZE)
    (out_dir / EVA_FILE).parent.mkdir(parents=True)
    torch.save(eva.state_dict(), out_dir / EVA_FILE)
    (out_dir / EVA_SHAPE_FILE).write_text(json.dumps(asdict(TINY_EVA), indent=2) + "\n", encoding="utf-8")
    processor = out_dir / PROCESSOR_DIR
    CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    ).save_pretrained(processor)
    CLIPVisionConfig(
        hidden_size=HIDDEN, num_attention_heads=HEADS, image_size=IMAGE_SIZE, patch_size=TINY_EVA.patch_size
    ).save_pretrained(processor)


def write_bin_shard(state: dict[str, torch.Tensor], out_dir: Path) -> None:
    """The weights as the checkpoints of 2023 were released: one ``.bin`` shard and its index."""
    tensors = {name: tensor.contiguous() for name, tensor in state.items()}
    torch.save(tensors, out_dir / SHARD)
    index = {"metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())}}
    (out_dir / INDEX).write_text(
        json.dumps({**index, "weight_map": dict.fromkeys(sorted(tensors), SHARD)}, indent=2) + "\n",
        encoding="utf-8",
    )


def build_tiny_llama_vid(spec: ModelSpec, out_dir: Path) -> None:
    """Write the tiny LLaMA-VID of ``spec`` into ``out_dir``."""
    shape = tiny_shape(spec, "llama-vid")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / TOKENIZER_MODEL).write_bytes(train_sentencepiece())
    # legacy: the word-start marker on every text piece, as the original's slow tokenizer has it; BOS first.
    tokenizer = AutoTokenizer.from_pretrained(out_dir, legacy=True, add_bos_token=True)
    tokenizer.save_pretrained(out_dir)
    torch.manual_seed(shape.seed)
    bert_vocab_size = save_bert(out_dir)
    save_vision(out_dir)
    keys = llama_vid_keys(TINY_EVA.embed_dim)
    config = tiny_llama_config(tokenizer, shape.max_context_len)
    config.pad_token_id = 0
    for key, value in keys.items():
        setattr(config, key, value)
    bert = json.loads((out_dir / BERT_DIR / "config.json").read_text(encoding="utf-8"))
    config.qformer_shape = asdict(QFormerShape.from_bert_config(bert, bert_vocab_size, QFORMER_WIDTH))
    model = LlamaVidForCausalLM(config)
    torch.nn.init.normal_(model.model.vlm_att_query, std=0.02)
    write_bin_shard(model.state_dict(), out_dir)
    saved = {
        **config.to_dict(),
        "model_type": "llava",
        "architectures": ["LlavaLlamaAttForCausalLM"],
    }
    saved.pop("qformer_shape")
    (out_dir / "config.json").write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_eva_shape(folder: Path) -> EvaShape:
    """The ViT sizes a tiny checkpoint states; the real one's are ``EVAVisionTowerLavis``'s constants."""
    path = folder / EVA_SHAPE_FILE
    return EvaShape(**json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else EvaShape()
