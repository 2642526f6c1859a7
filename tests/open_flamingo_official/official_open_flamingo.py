"""OpenFlamingo's own inference path, run by its original code (the ``open-flamingo`` 2.0.1 package from
PyPI) in an environment of its era.

Not a kit module and no copy of OpenFlamingo's code: the parity test runs this file with the Python of
``.venv-openflamingo`` (``.ci/open-flamingo-official.sh``), which imports nothing of the kit.

Per sample, the README's "Generating text" steps in MileBench's worker loop: ``create_model_and_transforms``
once (the checkpoint's open_clip config registered first) and its ``checkpoint.pt`` loaded with
``strict=False``; the worker's CLEVR-Change fix and ``<ImageHere>`` -> ``<image>`` (with
``--chunked``, ``<|endofchunk|>`` before every picture but the first); each picture through the returned
image processor, ``torch.cat`` of ``unsqueeze(0)`` rows, then ``unsqueeze(1).unsqueeze(0)``; the
tokenizer, padding side left, on the text; ``model.generate(vision_x=..., lang_x=..., attention_mask=...)``
with the benchmark's settings; the new ids decoded with ``skip_special_tokens=True`` and stripped. It
writes each sample's text, ids and answer, and its ``vision_x``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import open_clip
import torch
from open_flamingo import create_model_and_transforms
from PIL import Image


def interleaved(question: str, chunked: bool) -> str:
    question = question.replace("<ImageHere><ImageHere>", "<ImageHere>\n<ImageHere>\n")
    first, *rest = question.split("<ImageHere>")
    marks = ["<image>" if i == 0 or not chunked else "<|endofchunk|><image>" for i in range(len(rest))]
    return first + "".join(mark + piece for mark, piece in zip(marks, rest, strict=True))


def run(args: argparse.Namespace) -> None:
    if args.open_clip_config:
        open_clip.add_model_config(args.open_clip_config)
    model, image_processor, tokenizer = create_model_and_transforms(
        clip_vision_encoder_path=args.clip,
        clip_vision_encoder_pretrained=args.clip_pretrained,
        lang_encoder_path=str(args.model),
        tokenizer_path=str(args.model),
        cross_attn_every_n_layers=args.cross_attn_every_n_layers,
    )
    model.load_state_dict(torch.load(args.model / "checkpoint.pt", map_location="cpu"), strict=False)
    model.eval()
    tokenizer.padding_side = "left"
    gen_kwargs = json.loads(args.gen_kwargs)

    results, vision = [], {}
    for sample in json.loads(args.samples.read_text()):
        text = interleaved(sample["prompt"], args.chunked)
        pictures = [Image.open(path).convert("RGB") for path in sample["images"]]
        vision_x = torch.cat([image_processor(p).unsqueeze(0) for p in pictures], dim=0)
        vision_x = vision_x.unsqueeze(1).unsqueeze(0)
        lang_x = tokenizer([text], return_tensors="pt")
        with torch.inference_mode():
            generated = model.generate(
                vision_x=vision_x,
                lang_x=lang_x["input_ids"],
                attention_mask=lang_x["attention_mask"],
                **gen_kwargs,
            )
        new_ids = generated[:, lang_x["input_ids"].shape[1] :]
        results.append(
            {
                "task": sample["task"],
                "sample_id": sample["sample_id"],
                "prompt": text,
                "input_ids": lang_x["input_ids"][0].tolist(),
                "new_ids": new_ids[0].tolist(),
                "answer": tokenizer.batch_decode(new_ids, skip_special_tokens=True)[0].strip(),
            }
        )
        vision[f"{sample['task']}/{sample['sample_id']}"] = vision_x
    (args.out / "results.json").write_text(json.dumps(results))
    torch.save(vision, args.out / "vision.pt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="Language model, tokenizer, checkpoint.pt.")
    parser.add_argument("--clip", required=True, help="open_clip model name.")
    parser.add_argument("--clip-pretrained", default=None)
    parser.add_argument("--open-clip-config", default=None, help="An open_clip model config to register.")
    parser.add_argument("--cross-attn-every-n-layers", type=int, required=True)
    parser.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    parser.add_argument("--gen-kwargs", required=True)
    parser.add_argument("--chunked", action="store_true")
    parser.add_argument("--out", type=Path, required=True, help="Folder for results.json and vision.pt.")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
