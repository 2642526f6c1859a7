"""LLaMA-VID's own inference path, run by its original code (the ``llamavid`` package of
github.com/dvlab-research/LLaMA-VID) in an environment of its era.

Not a kit module, and no copy of LLaMA-VID's code: the parity test runs this file with the Python of
``.venv-llama-vid`` (``.ci/llama-vid-official.sh``: transformers 4.31, llava 1.1.1, timm 0.6.13) and puts
a checkout's folder first on the import path, so ``llamavid`` is the original package.

The model is loaded as ``llamavid/eval/model_video_chatgpt_general.py`` loads it, by
``load_pretrained_model`` from the checkpoint's folder (also the working directory, against which the
original resolves ``mm_vision_tower``, ``image_processor`` and ``init_bert``'s ``bert-base-uncased``).
Per sample, that evaluation's steps with the sample's pictures as the video's frames: the question is the
prompt with its placeholders taken out, ``conv_templates["vicuna_v1"]`` around ``<image>\\n`` and the
question, ``tokenizer_image_token``, ``image_processor.preprocess`` of the frames, ``update_prompt``,
``generate`` with llava's ``KeywordsStoppingCriteria`` on ``</s>``, the decoding. Departures, each for the
CPU or the tiny checkpoint: no ``.cuda()``/``.half()``; the model loaded in float32 (``torch_dtype`` of
``load_pretrained_model``) and its attention modules left in it (``initialize_attention_modules`` casts
them to float16 ``for_eval``) and the vision tower put back in float32 (``load_pretrained_model`` casts it
to float16); ``EVAVisionTowerLavis.load_model`` builds the ViT with the tiny
checkpoint's sizes (``llama_vid_eva.json``) instead of the hard-coded ViT-g (the same class, processor
size, interpolation and load); the stop keyword optionally given in place of the turn's (so the parity test
sees the rule act); greedy decoding with the benchmark's limits instead of the evaluation's
sampling at temperature 0.2; the pictures as a list (a clip's frames are one array); torchvision's
compiled operators are left out (the PyPI wheel of torchvision 0.28 links CUDA libraries, absent with the
CPU torch; timm imports torchvision but the ViT uses none of them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
from functools import partial
from pathlib import Path

import torch
from PIL import Image


def load(code: Path, model_dir: Path):
    sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
    sys.path.insert(0, str(code))
    os.chdir(model_dir)
    from llamavid.model import llamavid_arch
    from llamavid.model.builder import load_pretrained_model
    from llamavid.model.language_model.llava_llama_vid import LlavaLlamaAttForCausalLM
    from llamavid.model.multimodal_encoder import eva_vit

    sizes = json.loads((model_dir / "llama_vid_eva.json").read_text())

    def load_model(self) -> None:
        self.image_processor = eva_vit.CLIPImageProcessor.from_pretrained(self.image_processor_name)
        self.vision_tower = eva_vit.VisionTransformer(
            img_size=self.image_processor.size["shortest_edge"],
            patch_size=sizes["patch_size"],
            use_mean_pooling=False,
            embed_dim=sizes["embed_dim"],
            depth=sizes["depth"],
            num_heads=sizes["num_heads"],
            mlp_ratio=sizes["mlp_ratio"],
            qkv_bias=True,
            drop_path_rate=self.drop_path_rate,
            norm_layer=partial(torch.nn.LayerNorm, eps=1e-6),
            use_checkpoint=self.use_checkpoint,
        )
        state_dict = torch.load(self.vision_tower_name, map_location="cpu")
        eva_vit.interpolate_pos_embed(self.vision_tower, state_dict)
        self.vision_tower.load_state_dict(state_dict, strict=False)
        self.vision_tower.requires_grad_(False)
        self.is_loaded = True

    eva_vit.EVAVisionTowerLavis.load_model = load_model
    init = eva_vit.EVAVisionTowerLavis.__init__

    def tiny_init(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        self.patch_size, self.out_channel = sizes["patch_size"], sizes["embed_dim"]

    eva_vit.EVAVisionTowerLavis.__init__ = tiny_init
    loader = LlavaLlamaAttForCausalLM.from_pretrained

    def in_float32(*args, **kwargs):
        return loader(*args, **{**kwargs, "torch_dtype": torch.float32})

    LlavaLlamaAttForCausalLM.from_pretrained = in_float32
    attention = llamavid_arch.LLaMAVIDMetaModel.initialize_attention_modules

    def in_model_dtype(self, model_args, for_eval=False) -> None:
        attention(self, model_args, for_eval=False)

    llamavid_arch.LLaMAVIDMetaModel.initialize_attention_modules = in_model_dtype
    loaded = load_pretrained_model(str(model_dir), None, "llama-vid-tiny", device_map="cpu", device="cpu")
    loaded[1].get_vision_tower().to(dtype=torch.float32)
    return loaded


def run(
    code: Path, model_dir: Path, samples: list[dict], gen_kwargs: dict, keywords: list[str], out: Path
) -> None:
    tokenizer, model, image_processor, _ = load(code, model_dir)
    from llamavid.constants import DEFAULT_IMAGE_TOKEN, IMAGE_TOKEN_INDEX
    from llamavid.conversation import SeparatorStyle, conv_templates
    from llava.mm_utils import KeywordsStoppingCriteria, tokenizer_image_token

    results, pixels, bert_ids = [], {}, {}
    for sample in samples:
        question = sample["prompt"].replace("<ImageHere>", "")
        frames = [Image.open(p).convert("RGB") for p in sample["images"]]
        video = image_processor.preprocess(frames, return_tensors="pt")["pixel_values"]
        qs = DEFAULT_IMAGE_TOKEN + "\n" + question
        conv = conv_templates["vicuna_v1"].copy()
        conv.append_message(conv.roles[0], qs)
        conv.append_message(conv.roles[1], None)
        prompt = conv.get_prompt()
        input_ids = tokenizer_image_token(
            prompt, tokenizer, IMAGE_TOKEN_INDEX, return_tensors="pt"
        ).unsqueeze(0)
        stop_str = conv.sep if conv.sep_style != SeparatorStyle.TWO else conv.sep2
        stop_str = keywords[0] if keywords else stop_str
        stopping_criteria = KeywordsStoppingCriteria([stop_str], tokenizer, input_ids)
        with torch.inference_mode():
            model.update_prompt([[question]])
            output_ids = model.generate(
                input_ids, images=[video], use_cache=True, stopping_criteria=[stopping_criteria], **gen_kwargs
            )
        input_token_len = input_ids.shape[1]
        new_ids = output_ids[0, input_token_len:].tolist()
        outputs = tokenizer.batch_decode(output_ids[:, input_token_len:], skip_special_tokens=True)[0]
        outputs = outputs.strip()
        if outputs.endswith(stop_str):
            outputs = outputs[: -len(stop_str)]
        key = f"{sample['task']}/{sample['sample_id']}"
        bert = model.get_model().vlm_att_tokenlizer(
            [question], padding="longest", truncation=True, max_length=256, return_tensors="pt"
        )
        results.append(
            {
                "task": sample["task"],
                "sample_id": sample["sample_id"],
                "prompt": prompt,
                "input_ids": input_ids[0].tolist(),
                "new_ids": new_ids,
                "answer": outputs.strip(),
            }
        )
        pixels[key] = video
        bert_ids[key] = bert.input_ids
    torch.save(pixels, out / "pixels.pt")
    torch.save(bert_ids, out / "qformer_input_ids.pt")
    (out / "results.json").write_text(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, required=True, help="A LLaMA-VID checkout (llamavid/).")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    parser.add_argument("--gen-kwargs", required=True, help="generate's keyword arguments, as JSON.")
    parser.add_argument("--keywords", default="[]", help="The stop keyword in place of the turn's, as JSON.")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    samples = json.loads(args.samples.read_text())
    keywords = json.loads(args.keywords)
    run(args.code, args.model.resolve(), samples, json.loads(args.gen_kwargs), keywords, args.out.resolve())


if __name__ == "__main__":
    main()
