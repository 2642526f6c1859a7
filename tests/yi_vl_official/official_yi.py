"""Yi-VL's own inference path, run by its original code (the ``VL/`` folder of github.com/01-ai/Yi) in an
environment of its era.

Not a kit module, and no copy of Yi's code: the parity test runs this file with the Python of the
official LLaVA environment (transformers 4.37, tokenizers 0.15, sentencepiece; ``.ci/llava-official.sh``)
and puts a checkout's ``VL`` folder first on the import path, so ``llava`` is Yi's package.

Per sample, ``single_inference.py``'s steps in MileBench's worker loop: ``load_pretrained_model`` once
(with ``key_info["model_path"]`` set as the script sets it), the worker's CLEVR-Change fix and
``<ImageHere>`` -> ``<image_placeholder>``, ``conv_templates["mm_default"]``, ``tokenizer_image_token``,
``expand2square`` with the image processor's mean when the config pads, ``image_processor.preprocess``,
``generate`` with ``KeywordsStoppingCriteria`` and ``use_cache``, then ``batch_decode`` of the new ids,
strip, a trailing keyword cut, strip. On a CPU two steps differ from a GPU run: the code's ``.to("cuda")``
goes to the CPU, and the bfloat16 model is made float32.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
from PIL import Image


def cpu_instead_of_cuda() -> None:
    """The original moves the vision tower with ``.to(device="cuda")``; here that means the CPU."""
    move = torch.nn.Module.to

    def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
        if kwargs.get("device") == "cuda":
            kwargs["device"] = "cpu"
        return move(self, *args, **kwargs)

    torch.nn.Module.to = to  # type: ignore[method-assign]


def run(
    code: Path, model_dir: Path, samples: list[dict], gen_kwargs: dict, keywords: list[str], out: Path
) -> None:
    sys.path.insert(0, str(code))
    sys.path.insert(1, str(Path(__file__).parents[1] / "llava_official"))
    from llava.conversation import conv_templates
    from llava.mm_utils import (
        KeywordsStoppingCriteria,
        expand2square,
        load_pretrained_model,
        tokenizer_image_token,
    )
    from llava.model.constants import DEFAULT_IMAGE_TOKEN, IMAGE_TOKEN_INDEX, key_info
    from official_worker import to_float32

    cpu_instead_of_cuda()
    key_info["model_path"] = str(model_dir)
    tokenizer, model, image_processor, _ = load_pretrained_model(str(model_dir), device_map="cpu")
    to_float32(model)
    model.eval()
    pads = getattr(model.config, "image_aspect_ratio", None) == "pad"
    mean = tuple(int(x * 255) for x in image_processor.image_mean)

    results, pixels = [], {}
    for sample in samples:
        question = sample["prompt"].replace("<ImageHere><ImageHere>", "<ImageHere>\n<ImageHere>\n")
        conv = conv_templates["mm_default"].copy()
        conv.append_message(conv.roles[0], question.replace("<ImageHere>", DEFAULT_IMAGE_TOKEN))
        conv.append_message(conv.roles[1], None)
        prompt = conv.get_prompt()
        input_ids = tokenizer_image_token(prompt, tokenizer, IMAGE_TOKEN_INDEX, return_tensors="pt")[None]
        pictures = [Image.open(path).convert("RGB") for path in sample["images"]]
        if pads:
            pictures = [expand2square(picture, mean) for picture in pictures]
        image_tensor = torch.stack(
            [image_processor.preprocess(p, return_tensors="pt")["pixel_values"][0] for p in pictures]
        )
        criterion = KeywordsStoppingCriteria(keywords, tokenizer, input_ids)
        with torch.inference_mode():
            output_ids = model.generate(
                input_ids, images=image_tensor, stopping_criteria=[criterion], use_cache=True, **gen_kwargs
            )
        new_ids = output_ids[:, input_ids.shape[1] :]
        answer = tokenizer.batch_decode(new_ids, skip_special_tokens=True)[0].strip()
        if answer.endswith(keywords[0]):
            answer = answer[: -len(keywords[0])]
        results.append(
            {
                "task": sample["task"],
                "sample_id": sample["sample_id"],
                "prompt": prompt,
                "input_ids": input_ids[0].tolist(),
                "new_ids": new_ids[0].tolist(),
                "answer": answer.strip(),
            }
        )
        pixels[f"{sample['task']}/{sample['sample_id']}"] = image_tensor
    torch.save(pixels, out / "pixels.pt")
    (out / "results.json").write_text(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, required=True, help="The VL folder of a Yi checkout.")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    parser.add_argument("--gen-kwargs", type=json.loads, required=True)
    parser.add_argument("--keywords", type=json.loads, required=True, help="JSON list of stop keywords.")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    samples = json.loads(args.samples.read_text())
    run(args.code, args.model, samples, args.gen_kwargs, args.keywords, args.out)


if __name__ == "__main__":
    main()
