"""Mantis's own multi-image chat path, run by its original code (github.com/TIGER-AI-Lab/Mantis) in an
environment of its era.

Not a kit module, and no copy of Mantis's code: the parity test runs this file with the Python of the
official LLaVA environment (transformers 4.37, tokenizers 0.15; ``.ci/llava-official.sh``) and puts a
Mantis checkout first on the import path.

As ``examples/run_mantis.py`` loads and chats: ``MLlavaProcessor.from_pretrained``, Mantis's
``LlavaForConditionalGeneration.from_pretrained(..., torch_dtype=bfloat16)``, then per sample, in
MileBench's worker loop (its CLEVR-Change fix, ``<ImageHere>`` -> ``<image>``), one ``chat_mllava`` call
with the benchmark's generation settings. What the kit is compared on is recorded on the way, without
changing the path: the text the processor's image denotation returns, and the ``generate`` call's ids,
pixels and output. On a CPU the bfloat16 model is made float32.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
from PIL import Image


def run(code: Path, model_dir: Path, samples: list[dict], gen_kwargs: dict, out: Path) -> None:
    sys.path.insert(0, str(code))
    sys.path.insert(1, str(Path(__file__).parents[1] / "llava_official"))
    from mantis.models.mllava import LlavaForConditionalGeneration, MLlavaProcessor, chat_mllava
    from official_worker import to_float32

    processor = MLlavaProcessor.from_pretrained(str(model_dir))
    model = LlavaForConditionalGeneration.from_pretrained(str(model_dir), torch_dtype=torch.bfloat16)
    to_float32(model)
    model.eval()

    seen: dict[str, Any] = {}
    denote = processor.preprocess_interleaved_images_and_text
    generate = model.generate

    def denoted(*args: Any, **kwargs: Any) -> Any:
        seen["texts"], images = denote(*args, **kwargs)
        return seen["texts"], images

    def generated(**kwargs: Any) -> Any:
        seen["inputs"] = kwargs
        seen["output"] = generate(**kwargs)
        return seen["output"]

    processor.preprocess_interleaved_images_and_text = denoted
    model.generate = generated

    results, pixels = [], {}
    for sample in samples:
        text = sample["prompt"].replace("<ImageHere><ImageHere>", "<ImageHere>\n<ImageHere>\n")
        images = [Image.open(path).convert("RGB") for path in sample["images"]]
        with torch.inference_mode():
            answer, _ = chat_mllava(
                text.replace("<ImageHere>", "<image>"), images, model, processor, **gen_kwargs
            )
        input_ids = seen["inputs"]["input_ids"]
        results.append(
            {
                "task": sample["task"],
                "sample_id": sample["sample_id"],
                "prompt": seen["texts"][0],
                "input_ids": input_ids[0].tolist(),
                "new_ids": seen["output"][0, input_ids.shape[1] :].tolist(),
                "answer": answer,
            }
        )
        pixels[f"{sample['task']}/{sample['sample_id']}"] = seen["inputs"]["pixel_values"]
    torch.save(pixels, out / "pixels.pt")
    (out / "results.json").write_text(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--code", type=Path, required=True, help="A Mantis checkout (the folder holding mantis/)."
    )
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    parser.add_argument("--gen-kwargs", type=json.loads, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    run(args.code, args.model, json.loads(args.samples.read_text()), args.gen_kwargs, args.out)


if __name__ == "__main__":
    main()
