"""Video-LLaMA-2's own Chat, run by its original code (the ``video_llama`` package and ``eval_configs`` of
github.com/DAMO-NLP-SG/Video-LLaMA) in an environment of its era.

Not a kit module, and no copy of Video-LLaMA's code: the parity test runs this file with the Python of
``.venv-video-llama-2`` (``.ci/video-llama-2-official.sh``: transformers 4.28, timm 0.6.13) and puts a
checkout's folder first on the import path, so ``video_llama`` is the original package.

The model is built as ``demo_video.py`` builds it: ``eval_configs/video_llama_eval_only_vl.yaml`` through
``Config.build_model_config`` (merged over ``configs/models/video_llama.yaml``) with the checkpoint's paths,
``from_config`` (the ViT, the BLIP-2 Q-Former and query tokens, the slow ``LlamaTokenizer`` with
``<ImageHere>`` added, the Llama of ``modeling_llama.py``, the frame position embedding, the video Q-Former,
``llama_proj``, the VL checkpoint with ``strict=False``; no audio branch), ``model.eval()``, the webvid
``vis_processor`` and ``Chat``; ``conv_llava_llama_2`` with the system text ``demo_video.py`` sets for an
upload. Each sample is answered by ``Chat`` itself: ``Chat.ask`` for each text piece that is not blank and
``Chat.upload_img`` (the picture's path) for each picture, in the prompt's order, then ``Chat.answer`` with
the benchmark's ``max_new_tokens`` and ``max_length``. Departures, each for the CPU, the tiny checkpoint or
MileBench's settings: the config's ``llama_model`` and ``ckpt`` lines, which the README tells a user to set
(``llama_model`` lists the choices joined by ``or``, which is no YAML), are set to the tiny checkpoint's paths
before the file is parsed; ``Chat.upload_img`` appends a new user message per picture, so one that follows the
user's message is joined to it by a space, as ``Chat.ask`` joins a question to an upload (the pictures stay
at their places in one message); no ``.to("cuda")`` and the Llama loaded in float32; ``vit_precision``
``fp32`` (``fp16`` converts the ViT's weights to half, which its CPU path, without autocast, cannot run);
``create_eva_vit_g`` builds the ViT with the tiny checkpoint's sizes from its local ``eva_vit_g.pth``
instead of the hard-coded ViT-g and the LAVIS URL (the same class, interpolation and load), and
``BertConfig.from_pretrained("bert-base-uncased")`` gives the tiny Q-Formers' sizes instead of the hub's
(both read the hub); the BERT tokenizer, which inference never uses, is not loaded (it needs the hub);
``generate`` decodes greedily with MileBench's ``min_new_tokens`` 1 (``Chat.answer`` samples with top_p
0.9), its other arguments as ``Chat.answer`` passes them; torchvision's compiled operators are left out (the
PyPI wheel of torchvision 0.28 links CUDA libraries, absent with the CPU torch) and so is
``video_llama.models.ImageBind.data`` (the audio loader, which needs torchaudio and pytorchvideo; the
pictures never reach it). Beside each answer it writes ``probe``: ``Chat.answer``'s decoding steps on the
generated ids without byte tokens, with special tokens put in (text, ``<s>``, text, ``</s>``, text), so the
decoding is compared also where a random answer's bytes are not text.

With ``--frames`` (the ``video-frames`` reading) each sample is answered through the video path instead:
``Chat.upload_video_without_audio`` (its ``vis_processor.transform``, ``encode_videoQformer_visual`` over
all frames, ``<Video><ImageHere></Video> `` and the message of ``load_video``), then ``Chat.ask`` with the
prompt without its placeholders, then ``Chat.answer``. Only ``load_video`` is replaced, at the point where
it returns: MileBench's pictures are no video file for decord, so the sample's pictures are returned as the
loaded frames, (C, T, H, W) float as ``load_video`` returns them, each resized to the ``height`` and
``width`` it is called with as ``Blip2ImageEvalProcessor`` resizes (Pillow, bicubic), and the message is
empty (pictures have no timestamps). A sample whose upload raises ``IndexError`` (more frames than the
frame position embedding has rows) is written with that error as its ``failure`` and the pixels it got.
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
SYSTEM = (
    "You are able to understand the visual content that the user provides. Follow the instructions "
    "carefully and explain your answers in detail."
)
"""``demo_video.py``'s ``chat_state.system`` for an image or a video upload."""


def pictures_as_loaded(paths: list[str], height: int, width: int) -> torch.Tensor:
    """What ``load_video`` returns for a video whose frames are these pictures: (C, T, H, W), float."""
    frames = [
        torch.from_numpy(np.array(Image.open(path).convert("RGB").resize((width, height), Image.BICUBIC)))
        for path in paths
    ]
    return torch.stack(frames).permute(3, 0, 1, 2).float()


def run(
    code: Path,
    model_dir: Path,
    samples: list[dict],
    max_new_tokens: int,
    max_length: int,
    out: Path,
    frames: bool,
) -> None:
    sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
    audio = types.ModuleType("video_llama.models.ImageBind.data")
    audio.load_and_transform_audio_data = None
    sys.modules["video_llama.models.ImageBind.data"] = audio
    sys.path.insert(0, str(code))
    import video_llama.conversation.conversation_video as conversation_video
    import video_llama.models.blip2 as blip2
    import video_llama.models.video_llama as video_llama
    from omegaconf import OmegaConf
    from transformers import BertConfig
    from video_llama.common.config import Config
    from video_llama.common.registry import registry
    from video_llama.conversation.conversation_video import Chat, conv_llava_llama_2
    from video_llama.models import eva_vit
    from video_llama.processors import video_processor  # noqa: F401  (registers the processors)

    sizes = json.loads((model_dir / "video_llama_2.json").read_text())

    sys.path.append(str(Path(__file__).parents[1]))
    from lavis_tiny import load_in_float32, tiny_bert_config, tiny_eva_vit_g

    tiny_bert = tiny_bert_config(BertConfig, sizes["qformer"])
    blip2.create_eva_vit_g = tiny_eva_vit_g(eva_vit, sizes["eva"], model_dir)
    blip2.BertConfig = tiny_bert
    video_llama.BertConfig = tiny_bert
    blip2.Blip2Base.init_tokenizer = classmethod(lambda cls: None)
    load_in_float32(video_llama.LlamaForCausalLM)

    paths = {"llama_model": model_dir, "ckpt": model_dir / "VL_LLaMA_2_7B_Finetuned.pth"}
    lines = (code / "eval_configs" / "video_llama_eval_only_vl.yaml").read_text().splitlines()
    for n, line in enumerate(lines):
        name = line.strip().split(":")[0]
        if line.startswith("  ") and name in paths:
            lines[n] = f"  {name}: {json.dumps(str(paths[name]))}"
    config = OmegaConf.create("\n".join(lines))
    config.model.q_former_model = str(model_dir / "blip2_pretrained_flant5xxl.pth")
    config.model.num_query_token = sizes["num_query_token"]
    config.model.num_video_query_token = sizes["num_video_query_token"]
    config.model.max_frame_pos = sizes["max_frame_pos"]
    config.model.vit_precision = "fp32"
    cfg = Config.build_model_config(config)
    model_cls = registry.get_model_class(cfg.model.arch)
    model = model_cls.from_config(cfg.model)
    model.eval()
    vis_processor_cfg = config.datasets.webvid.vis_processor.train
    vis_processor = registry.get_processor_class(vis_processor_cfg.name).from_config(vis_processor_cfg)
    chat = Chat(model, vis_processor, device="cpu")

    seen: dict = {}
    processed = chat.image_vis_processor

    def recording_processor(image):
        pixels = processed(image)
        seen.setdefault("pixels", []).append(pixels)
        return pixels

    chat.image_vis_processor = recording_processor
    transform = vis_processor.transform

    def recording_transform(video):
        pixels = transform(video)
        seen["pixels"] = list(pixels.permute(1, 0, 2, 3))
        return pixels

    vis_processor.transform = recording_transform
    pictures = {f"{s['task']}/{s['sample_id']}": s["images"] for s in samples}

    def loaded_pictures(video_path, height, width, return_msg, **_):
        assert return_msg
        return pictures_as_loaded(pictures[video_path], height, width), ""

    conversation_video.load_video = loaded_pictures
    get_context_emb = chat.get_context_emb

    def recording_context(conv, img_list):
        seen["prompt"] = conv.get_prompt()
        return get_context_emb(conv, img_list)

    chat.get_context_emb = recording_context
    generate = model.llama_model.generate

    def benchmark_generate(**kwargs):
        seen["embeds"] = kwargs["inputs_embeds"][0].clone()
        output = generate(**{**kwargs, "do_sample": False, "min_new_tokens": 1})
        seen["output"] = output[0].tolist()
        return output

    model.llama_model.generate = benchmark_generate

    results, tensors = [], {}
    for sample in samples:
        seen.clear()
        key = f"{sample['task']}/{sample['sample_id']}"
        conv = conv_llava_llama_2.copy()
        conv.system = SYSTEM
        img_list: list = []
        with torch.no_grad():
            if frames:
                try:
                    chat.upload_video_without_audio(key, conv, img_list)
                except IndexError as err:
                    failure = f"{type(err).__name__}: {err}"
                    results.append(
                        {"task": sample["task"], "sample_id": sample["sample_id"], "failure": failure}
                    )
                    tensors[key] = {"pixel_values": torch.stack(seen["pixels"])}
                    continue
                question = sample["prompt"].replace("<ImageHere>", "")
                if question.strip():
                    chat.ask(question, conv)
            else:
                ask_with_pictures(chat, conv, img_list, sample)
            answer, _ = chat.answer(conv, img_list, max_new_tokens=max_new_tokens, max_length=max_length)
        segments = [
            model.llama_tokenizer(seg, return_tensors="pt", add_special_tokens=i == 0).input_ids[0].tolist()
            for i, seg in enumerate(seen["prompt"].split("<ImageHere>"))
        ]
        tokenizer = model.llama_tokenizer
        plain = [i for i in seen["output"][1:] if not BYTE.fullmatch(tokenizer.convert_ids_to_tokens(i))]
        probe = [*plain, tokenizer.bos_token_id, *plain[:4], tokenizer.eos_token_id, *plain[:2]]
        probe_text = tokenizer.decode(torch.tensor(probe), add_special_tokens=False)
        results.append(
            {
                "task": sample["task"],
                "sample_id": sample["sample_id"],
                "text": seen["prompt"],
                "input_ids": [i for n, seg in enumerate(segments) for i in ([-200] if n else []) + seg],
                "new_ids": seen["output"],
                "answer": answer,
                "probe": probe_text.split(conv.sep2)[0].split(conv.roles[1] + ":")[-1].strip(),
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
    prompt's order, a picture's message joined to the user's message before it."""
    question = sample["prompt"].replace("<ImageHere><ImageHere>", "<ImageHere>\n<ImageHere>\n")
    pieces = question.split("<ImageHere>")
    for i, piece in enumerate(pieces):
        if piece.strip():
            chat.ask(piece, conv)
        if i < len(pieces) - 1:
            chat.upload_img(sample["images"][i], conv, img_list)
            if len(conv.messages) > 1 and conv.messages[-2][0] == conv.roles[0]:
                conv.messages[-2][1] = " ".join([conv.messages[-2][1], conv.messages[-1][1]])
                del conv.messages[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--code", type=Path, required=True, help="A Video-LLaMA checkout (video_llama/, eval_configs/)."
    )
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    parser.add_argument("--max-new-tokens", type=int, required=True)
    parser.add_argument("--max-length", type=int, required=True, help="Chat.answer's max_length.")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--frames", action="store_true", help="All pictures as one video (Chat.upload_video_without_audio)."
    )
    args = parser.parse_args()
    samples = json.loads(args.samples.read_text())
    run(args.code, args.model, samples, args.max_new_tokens, args.max_length, args.out, args.frames)


if __name__ == "__main__":
    main()
