"""VideoChat2's own Chat, run by its original code (the ``video_chat2`` folder of
github.com/OpenGVLab/Ask-Anything) in an environment of its era.

Not a kit module, and no copy of VideoChat2's code: the parity test runs this file with the Python of
``.venv-videochat2`` (``.ci/videochat2-official.sh``: transformers 4.28.1, peft 0.3.0, timm 0.6.13) and puts
the ``video_chat2`` folder first on the import path, so ``models`` and ``conversation`` are the original's.

The model is built as ``demo.py`` builds it: ``configs/config.json`` through ``utils.config.Config``,
``VideoChat2_it`` (the UMT ViT, ``vision_layernorm``, the Q-Former with its text input and the
``vit_blip_model_path`` file loaded over it, the extra query tokens, the slow ``LlamaTokenizer``, the Llama of
``modeling_llama.py``, ``llama_proj``), peft's LoRA wrapped around the Llama with the demo's ``LoraConfig``,
the stage-3 file loaded with ``strict=False``, ``model.eval()`` and ``Chat``. Each sample is answered by
``Chat`` itself on the demo's conversation state: ``Chat.ask`` for each text piece that is not blank and
``Chat.upload_img`` (the picture, opened with PIL as RGB) for each picture, in the prompt's order, then
``Chat.answer`` with the benchmark's ``max_new_tokens``. Departures, each for the CPU, the tiny checkpoint or
MileBench's settings: the config's paths point at the tiny checkpoint, its ``videochat2_model_path`` (the
stage-2 file) is empty (the tiny checkpoint has none), and its ViT and Q-Former sizes are the tiny
checkpoint's (``config.vision_encoder``; ``BertConfig.from_pretrained`` and
``BertTokenizer.from_pretrained("bert-base-uncased")`` read the tiny sizes and vocabulary instead of the
hub's); the Llama is loaded in float32; ``Chat`` runs on the CPU (``upload_img``'s ``.cuda()`` becomes a
no-op); ``generate`` decodes greedily with MileBench's ``min_new_tokens`` 1 (``Chat.answer`` samples with
top_p 0.9), its other arguments as ``Chat.answer`` passes them; torchvision's compiled operators are left out
(the PyPI wheel of torchvision 0.28 links CUDA libraries, absent with the CPU torch) and so is the ``dataset``
package's ``__init__`` (its training datasets; ``conversation.py`` reads only
``dataset/video_transforms.py``). Beside each answer it writes ``probe``: ``Chat.answer``'s decoding steps on
the generated ids without byte tokens, with special tokens put in, so the decoding is compared also where a
random answer's bytes are not text.

With ``--frames`` (the ``video-frames`` reading) each sample is answered as ``demo.py`` answers a video
upload and a question: ``Chat.upload_video`` on a fresh conversation (``load_video``'s transform,
``get_sinusoid_encoding_table`` set as the ViT's ``pos_embed``, ``encode_img`` with ``Watch the video and
answer the question.``, ``<Video><VideoHere></Video>``), then ``Chat.ask`` with the prompt without its
placeholders, then ``Chat.answer``. Replaced, for MileBench's pictures and the tiny checkpoint: decord's
``VideoReader`` reads the sample's pictures (each opened with PIL as RGB) as the decoded frames, and
``get_index`` picks every one of them once (``num_segments`` the picture count; its spread over a longer
video would repeat or skip pictures); ``get_sinusoid_encoding_table`` is called with the tiny ViT's sizes
(its ``n_position`` and ``pre_n_position`` for the tiny patch grid, ``d_hid`` its width) where
``upload_video`` passes UMT-L's (``(224 // 16) ** 2`` patches a frame, width 1024 by default), its code
otherwise the original's with its checkpoint grid constant (14) set to the tiny grid, so that, as for
UMT-L, the grid asked for is the checkpoint's and only the resizing along time runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import types
from pathlib import Path

import numpy as np
import torch
from PIL import Image

BYTE = re.compile(r"<0x[0-9A-F]{2}>")
INSTRUCTION_FILE = "bert-base-uncased-vocab.txt"
UMT_GRID = 14
"""``get_sinusoid_encoding_table``'s checkpoint grid (``P = 14``), UMT-L's 224 px at 16 px patches."""


class Pictures:
    """decord's ``VideoReader`` as ``load_video`` uses it, over a sample's pictures: its length, each frame
    as an array (``asnumpy``), an average frame rate (read only for ``load_video``'s message, which
    ``upload_video`` drops)."""

    def __init__(self, paths: list[str]) -> None:
        self.frames = [np.array(Image.open(path).convert("RGB")) for path in paths]

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, index: int) -> types.SimpleNamespace:
        frame = self.frames[int(index)]
        return types.SimpleNamespace(asnumpy=lambda: frame)

    def get_avg_fps(self) -> float:
        return 1.0


def video_path(conversation, chat, pictures: dict[str, list[str]], vit: dict) -> None:
    """``Chat.upload_video`` on MileBench's pictures and the tiny ViT (the module docstring's
    replacements)."""
    conversation.VideoReader = lambda key, ctx: Pictures(pictures[key])

    def every_frame(num_frames, num_segments):
        assert num_frames == num_segments
        return np.arange(num_segments)

    chat.get_index = every_frame
    grid = vit["image_size"] // vit["patch_size"]
    original = conversation.Chat.get_sinusoid_encoding_table
    code = original.__code__
    assert code.co_consts.count(UMT_GRID) == 1
    consts = tuple(grid if c == UMT_GRID and type(c) is int else c for c in code.co_consts)
    tiny = types.FunctionType(
        code.replace(co_consts=consts), original.__globals__, original.__name__, original.__defaults__
    )

    def tiny_table(n_position, cur_frame):
        assert n_position == UMT_GRID**2 * cur_frame
        patches = grid**2
        return tiny(
            chat,
            n_position=patches * cur_frame,
            d_hid=vit["embed_dim"],
            cur_frame=cur_frame,
            ckpt_num_frame=4,
            pre_n_position=patches * 4,
        )

    chat.get_sinusoid_encoding_table = tiny_table


def run(
    code: Path, model_dir: Path, samples: list[dict], max_new_tokens: int, out: Path, frames: bool
) -> None:
    sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
    dataset = types.ModuleType("dataset")
    dataset.__path__ = [str(code / "dataset")]
    sys.modules["dataset"] = dataset
    sys.path.insert(0, str(code))
    import conversation
    import models.blip2.blip2 as blip2
    import models.videochat2_it as videochat2_it
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import BertTokenizer
    from utils.config import Config

    sizes = json.loads((model_dir / "videochat2.json").read_text())
    sys.path.append(str(Path(__file__).parents[1]))
    from lavis_tiny import load_in_float32, tiny_bert_config

    blip2.BertConfig = tiny_bert_config(blip2.BertConfig, sizes["qformer"])

    def init_tokenizer(cls, truncation_side="right"):
        tokenizer = BertTokenizer(str(model_dir / INSTRUCTION_FILE), truncation_side=truncation_side)
        tokenizer.add_special_tokens({"bos_token": "[DEC]"})
        return tokenizer

    blip2.Blip2Base.init_tokenizer = classmethod(init_tokenizer)
    import models.blip2.modeling_llama as modeling_llama

    load_in_float32(modeling_llama.LlamaForCausalLM)
    torch.Tensor.cuda = lambda self, *args, **kwargs: self

    cfg = Config.from_file(str(code / "configs" / "config.json"))
    cfg.model.vision_encoder.num_frames = 4
    vit = sizes["vit"]
    for name in ("image_size", "patch_size", "embed_dim", "depth", "num_heads", "return_index"):
        target = {
            "image_size": "img_size",
            "embed_dim": "encoder_embed_dim",
            "depth": "encoder_depth",
            "num_heads": "encoder_num_heads",
        }.get(name, name)
        cfg.model.vision_encoder[target] = vit[name]
    cfg.model.vit_blip_model_path = str(model_dir / "umt_l16_qformer.pth")
    cfg.model.llama_model_path = str(model_dir)
    cfg.model.videochat2_model_path = ""
    cfg.model.num_query_token = sizes["num_query_token"]
    cfg.model.extra_num_query_token = sizes["extra_num_query_token"]
    model = videochat2_it.VideoChat2_it(config=cfg.model)
    peft_config = LoraConfig(
        task_type=TaskType.CAUSAL_LM,
        inference_mode=False,
        r=sizes["lora_r"],
        lora_alpha=sizes["lora_alpha"],
        lora_dropout=0.0,
    )
    model.llama_model = get_peft_model(model.llama_model, peft_config)
    state_dict = torch.load(model_dir / "videochat2_7b_stage3.pth", "cpu")
    msg = model.load_state_dict(state_dict["model"], strict=False)
    assert not msg.unexpected_keys, msg.unexpected_keys
    model = model.eval()
    chat = conversation.Chat(model, device="cpu")

    seen: dict = {}
    encode_img = model.encode_img

    def recording_encode(image, instruction):
        seen.setdefault("pixels", []).extend(image[0].clone())
        return encode_img(image, instruction)

    model.encode_img = recording_encode
    get_context_emb = chat.get_context_emb

    def recording_context(conv, img_list):
        seen["prompt"] = conversation.get_prompt(conv)
        return get_context_emb(conv, img_list)

    chat.get_context_emb = recording_context
    generate = model.llama_model.generate

    def benchmark_generate(**kwargs):
        seen["embeds"] = kwargs["inputs_embeds"][0].clone()
        kwargs = {k: v for k, v in kwargs.items() if k not in ("top_p", "temperature")}
        output = generate(**{**kwargs, "do_sample": False, "min_new_tokens": 1})
        seen["output"] = output[0].tolist()
        return output

    model.llama_model.generate = benchmark_generate

    from utils.easydict import EasyDict

    if frames:
        video_path(conversation, chat, {f"{s['task']}/{s['sample_id']}": s["images"] for s in samples}, vit)
    results, tensors = [], {}
    for sample in samples:
        seen.clear()
        conv = EasyDict({"system": "", "roles": ("Human", "Assistant"), "messages": [], "sep": "###"})
        img_list: list = []
        with torch.no_grad():
            if frames:
                key = f"{sample['task']}/{sample['sample_id']}"
                chat.upload_video(key, conv, img_list, num_segments=len(sample["images"]))
                question = sample["prompt"].replace("<ImageHere>", "")
                if question.strip():
                    chat.ask(question, conv)
            else:
                ask_with_pictures(chat, conv, img_list, sample)
            answer, _, _ = chat.answer(conv, img_list, max_new_tokens=max_new_tokens)
        marker = "<VideoHere>" if "<VideoHere>" in seen["prompt"] else "<ImageHere>"
        segments = [
            model.llama_tokenizer(seg, return_tensors="pt", add_special_tokens=i == 0).input_ids[0].tolist()
            for i, seg in enumerate(seen["prompt"].split(marker))
        ]
        tokenizer = model.llama_tokenizer
        plain = [i for i in seen["output"][1:] if not BYTE.fullmatch(tokenizer.convert_ids_to_tokens(i))]
        probe = [*plain, tokenizer.bos_token_id, *plain[:4], tokenizer.eos_token_id, *plain[:2]]
        probe_text = tokenizer.decode(torch.tensor(probe), add_special_tokens=False)
        key = f"{sample['task']}/{sample['sample_id']}"
        results.append(
            {
                "task": sample["task"],
                "sample_id": sample["sample_id"],
                "text": seen["prompt"],
                "input_ids": [i for n, seg in enumerate(segments) for i in ([-200] if n else []) + seg],
                "new_ids": seen["output"],
                "answer": answer,
                "probe": probe_text.split("###")[0].split("Assistant:")[-1].strip(),
            }
        )
        tensors[key] = {
            "pixel_values": torch.stack(seen["pixels"]) if seen.get("pixels") else torch.zeros(0),
            "inputs_embeds": seen["embeds"],
        }
    torch.save(tensors, out / "tensors.pt")
    (out / "results.json").write_text(json.dumps(results))


def ask_with_pictures(chat, conv, img_list: list, sample: dict) -> None:
    """``Chat.ask`` for each text piece that is not blank and ``Chat.upload_img`` for each picture, in the
    prompt's order."""
    question = sample["prompt"].replace("<ImageHere><ImageHere>", "<ImageHere>\n<ImageHere>\n")
    pieces = question.split("<ImageHere>")
    for i, piece in enumerate(pieces):
        if piece.strip():
            chat.ask(piece, conv)
        if i < len(pieces) - 1:
            chat.upload_img(Image.open(sample["images"][i]).convert("RGB"), conv, img_list)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, required=True, help="A video_chat2 folder of Ask-Anything.")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    parser.add_argument("--max-new-tokens", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--frames", action="store_true", help="All pictures as one video (Chat.upload_video)."
    )
    args = parser.parse_args()
    samples = json.loads(args.samples.read_text())
    run(args.code, args.model, samples, args.max_new_tokens, args.out, args.frames)


if __name__ == "__main__":
    main()
