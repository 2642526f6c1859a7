"""MiniGPT-v2's own inference path, run by its original code (the ``minigpt4`` package and ``eval_configs`` of
github.com/Vision-CAIR/MiniGPT-4) in an environment of its era.

Not a kit module, and no copy of MiniGPT-4's code: the parity test runs this file with the Python of
``.venv-minigpt-v2`` (``.ci/minigpt-v2-official.sh``: transformers 4.30, peft 0.2.0, timm 0.6.13) and puts
a checkout's folder first on the import path, so ``minigpt4`` is the original package.

The model is built as ``eval_scripts/eval_vqa.py`` builds it: the model class's default config merged
with ``eval_configs/minigptv2_benchmark_evaluation.yaml`` and the checkpoint's paths, ``from_config`` (the
slow ``LlamaTokenizer``, the Llama in float16, peft LoRA, the EVA ViT, ``llama_proj``, the MiniGPT-v2
checkpoint with ``strict=False``), ``model.eval()`` (peft merges the LoRA pairs), the ``blip2_image_eval``
processor. Per sample, ``CONV_VISION_minigptv2`` with its system emptied and ``MiniGPTBase.generate``'s
steps for the sample's pictures: ``encode_img``, ``get_context_emb``, the language model's ``generate`` on
the embeddings, the decoding. Departures, each for the CPU or the tiny checkpoint: no ``.to("cuda")``;
``vit_precision: fp32`` and the Llama loaded in float32 (so the merge at ``eval()`` runs in float32);
``create_eva_vit_g`` builds the ViT with the tiny checkpoint's sizes from its local ``eva_vit_g.pth``
instead of the hard-coded ViT-g and the LAVIS URL (the same class, interpolation, load and fp16 choice);
``generate`` gets every picture of a sample (``MiniGPTBase.generate`` gives each text one); torchvision's
compiled operators are left out (the PyPI wheel of torchvision 0.28 links CUDA libraries, absent with the
CPU torch; MiniGPT-v2 uses only its PIL transforms).
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from functools import partial
from pathlib import Path

import torch
from PIL import Image


def run(code: Path, model_dir: Path, samples: list[dict], max_new_tokens: int, out: Path) -> None:
    sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
    sys.path.insert(0, str(code))
    import minigpt4.models.base_model as base_model
    from minigpt4.common.registry import registry
    from minigpt4.conversation.conversation import CONV_VISION_minigptv2
    from minigpt4.models import eva_vit, minigpt_v2  # noqa: F401  (registers the model)
    from minigpt4.processors import blip_processors  # noqa: F401  (registers the processors)
    from omegaconf import OmegaConf

    sizes = json.loads((model_dir / "minigpt_v2.json").read_text())

    def create_eva_vit_g(img_size=224, drop_path_rate=0.4, use_checkpoint=False, precision="fp16"):
        eva = sizes["eva"]
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

    base_model.create_eva_vit_g = create_eva_vit_g
    loader = base_model.LlamaForCausalLM.from_pretrained

    def in_float32(*args, **kwargs):
        return loader(*args, **{**kwargs, "torch_dtype": torch.float32})

    base_model.LlamaForCausalLM.from_pretrained = in_float32
    model_cls = registry.get_model_class("minigpt_v2")
    cfg = OmegaConf.merge(
        OmegaConf.load(model_cls.default_config_path("pretrain")).model,
        OmegaConf.load(code / "eval_configs" / "minigptv2_benchmark_evaluation.yaml").model,
        {
            "llama_model": str(model_dir),
            "ckpt": str(model_dir / "minigptv2_checkpoint.pth"),
            "image_size": sizes["image_size"],
            "lora_r": sizes["lora_r"],
            "lora_alpha": sizes["lora_alpha"],
            "vit_precision": "fp32",
        },
    )
    model = model_cls.from_config(cfg)
    model.eval()
    vis_cfg = OmegaConf.create({"name": "blip2_image_eval", "image_size": sizes["image_size"]})
    vis_processor = registry.get_processor_class("blip2_image_eval").from_config(vis_cfg)
    conv_temp = CONV_VISION_minigptv2.copy()
    conv_temp.system = ""

    results, pixels, embeds = [], {}, {}
    for sample in samples:
        question = sample["prompt"].replace("<ImageHere><ImageHere>", "<ImageHere>\n<ImageHere>\n")
        question = question.replace("<ImageHere>", "<Img><ImageHere></Img>")
        conv = conv_temp.copy()
        conv.append_message(conv.roles[0], question)
        conv.append_message(conv.roles[1], None)
        text = conv.get_prompt()
        images = torch.stack([vis_processor(Image.open(p).convert("RGB")) for p in sample["images"]])
        segments = [
            model.llama_tokenizer(seg, return_tensors="pt", add_special_tokens=i == 0).input_ids[0].tolist()
            for i, seg in enumerate(text.split("<ImageHere>"))
        ]
        ids = [i for n, seg in enumerate(segments) for i in ([-200] if n else []) + seg]
        with torch.no_grad():
            img_embeds, _ = model.encode_img(images)
            embs = model.get_context_emb(text, [emb[None] for emb in img_embeds])
            attn_mask = torch.ones(embs.shape[:2], dtype=torch.int)
            with model.maybe_autocast():
                outputs = model.llama_model.generate(
                    inputs_embeds=embs,
                    attention_mask=attn_mask,
                    max_new_tokens=max_new_tokens,
                    num_beams=1,
                    length_penalty=1,
                    temperature=1,
                    do_sample=False,
                    min_length=1,
                    top_p=0.9,
                    repetition_penalty=1,
                )
        output_token = outputs[0]
        new_ids = output_token.tolist()
        if output_token[0] == 0:
            output_token = output_token[1:]
        answer = model.llama_tokenizer.decode(output_token, skip_special_tokens=True)
        answer = answer.split("</s>")[0].replace("<s>", "").split(r"[/INST]")[-1].strip()
        key = f"{sample['task']}/{sample['sample_id']}"
        results.append(
            {
                "task": sample["task"],
                "sample_id": sample["sample_id"],
                "text": text,
                "input_ids": ids,
                "new_ids": new_ids,
                "answer": answer,
            }
        )
        pixels[key] = images
        embeds[key] = embs[0]
    torch.save(pixels, out / "pixels.pt")
    torch.save(embeds, out / "embeds.pt")
    (out / "results.json").write_text(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--code", type=Path, required=True, help="A MiniGPT-4 checkout (minigpt4/, eval_configs/)."
    )
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    parser.add_argument("--max-new-tokens", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    samples = json.loads(args.samples.read_text())
    run(args.code, args.model, samples, args.max_new_tokens, args.out)


if __name__ == "__main__":
    main()
