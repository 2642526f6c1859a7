"""Valley's own inference path, run by its original code (the ``valley`` package of
github.com/RupertLuo/Valley) in an environment of its era.

Not a kit module, and no copy of Valley's code: the parity test runs this file with the Python of
``.venv-valley`` (``.ci/valley-official.sh``: transformers 4.28, tokenizers 0.13.3) and puts a checkout's
folder first on the import path, so ``valley`` is the original package.

The model is loaded as ``valley/inference/run_valley_llamma_v2.py`` loads it: ``ValleyLlamaForCausalLM.
from_pretrained`` of the checkpoint's folder (also the working directory, against which the original
resolves ``mm_vision_tower``), ``AutoTokenizer.from_pretrained`` and the script's ``init_vision_token``
(its six lines here: the script runs at import). Per sample, ``completion``'s steps with the sample's
pictures as the video's frames: the script's messages with ``<video>`` and the question (the prompt with
its placeholders taken out), ``build_inputs``, the frames through ``CLIPImageProcessor.from_pretrained(
mm_vision_tower)`` (as ``model_worker.py`` loads it; ``load_video``'s frame branch preprocesses them so),
``generate`` with ``KeywordsStoppingCriteria``, ``batch_decode`` of the new tokens and
``process_response``. Departures, each for the CPU, the tiny checkpoint or the comparison: the model and
frames in float32 (``torch_dtype`` float16 and ``.half()`` in the original); ``build_inputs`` writes one
``<vi_frame>`` per frame in place of its eight (the token's string, which it multiplies by eight, here
multiplies to the frame count), as the kit's execution states; the stop keyword given (``###`` in
``completion``), so the parity test sees the rule act; greedy decoding with the benchmark's limits
instead of the script's sampling at temperature 0.2; torchvision's compiled operators are left out (the
PyPI wheel of torchvision 0.28 links CUDA libraries, absent with the CPU torch; ``data_util`` imports
torchvision's transforms, which the path does not call).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
from pathlib import Path

import torch
from PIL import Image

SYSTEM_PROMPT = (
    "You are Valley, a large language and vision assistant trained by ByteDance. You are able to understand "
    "the visual content or video that the user provides, and assist the user with a variety of tasks using "
    "natural language. Follow the instructions carefully and explain your answers in detail."
)
"""run_valley_llamma_v2.py's system_prompt (the script itself cannot be imported: it runs at import)."""


class Recording:
    """The tokenizer, noting the text ``build_inputs`` hands it."""

    def __init__(self, tokenizer) -> None:
        object.__setattr__(self, "tokenizer", tokenizer)
        object.__setattr__(self, "texts", [])

    def __call__(self, texts, **kwargs):
        self.texts.append(texts[0])
        return self.tokenizer(texts, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)

    def __setattr__(self, name, value) -> None:
        setattr(self.tokenizer, name, value)


def frame_token(token: str, frames: int) -> str:
    """The frame token whose ``* 8`` in ``build_inputs`` writes it once per frame."""

    class Frames(str):
        def __mul__(self, _: object) -> str:
            return token * frames

    return Frames(token)


def run(
    code: Path, model_dir: Path, samples: list[dict], gen_kwargs: dict, keywords: list[str], out: Path
) -> None:
    sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
    sys.path.insert(0, str(code))
    os.chdir(model_dir)
    from transformers import AutoTokenizer, CLIPImageProcessor
    from valley.model import valley_model
    from valley.model.valley_model import ValleyLlamaForCausalLM
    from valley.util.config import (
        DEFAULT_IM_END_TOKEN,
        DEFAULT_IM_START_TOKEN,
        DEFAULT_IMAGE_PATCH_TOKEN,
        DEFAULT_VI_END_TOKEN,
        DEFAULT_VI_START_TOKEN,
        DEFAULT_VIDEO_FRAME_TOKEN,
        DEFAULT_VIDEO_TOKEN,
    )
    from valley.util.data_util import KeywordsStoppingCriteria

    model = ValleyLlamaForCausalLM.from_pretrained(str(model_dir), torch_dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    vision_config = model.get_model().vision_tower.config  # init_vision_token
    vision_config.im_start_token, vision_config.im_end_token = tokenizer.convert_tokens_to_ids(
        [DEFAULT_IM_START_TOKEN, DEFAULT_IM_END_TOKEN]
    )
    vision_config.vi_start_token, vision_config.vi_end_token = tokenizer.convert_tokens_to_ids(
        [DEFAULT_VI_START_TOKEN, DEFAULT_VI_END_TOKEN]
    )
    vision_config.vi_frame_token = tokenizer.convert_tokens_to_ids(DEFAULT_VIDEO_FRAME_TOKEN)
    vision_config.im_patch_token = tokenizer.convert_tokens_to_ids([DEFAULT_IMAGE_PATCH_TOKEN])[0]
    model.eval()
    image_processor = CLIPImageProcessor.from_pretrained(model.config.mm_vision_tower)

    results, pixels = [], {}
    for sample in samples:
        question = sample["prompt"].replace("<ImageHere>", "")
        frames = [Image.open(p).convert("RGB") for p in sample["images"]]
        video = image_processor.preprocess(frames, return_tensors="pt")["pixel_values"]
        message = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "Hi!"},
            {"role": "assistent", "content": "Hi there! How can I help you today?"},
            {"role": "user", "content": f"{DEFAULT_VIDEO_TOKEN} {question}"},
        ]
        valley_model.DEFAULT_VIDEO_FRAME_TOKEN = frame_token(DEFAULT_VIDEO_FRAME_TOKEN, len(frames))
        recording = Recording(tokenizer)
        inputs = model.build_inputs(recording, message)
        input_ids = torch.as_tensor(inputs.input_ids)
        images = video.unsqueeze(0)
        stopping_criteria = KeywordsStoppingCriteria(keywords, tokenizer, input_ids)
        with torch.no_grad():
            output_ids = model.generate(
                input_ids=input_ids, images=images, stopping_criteria=[stopping_criteria], **gen_kwargs
            )
        input_token_len = input_ids.shape[1]
        outputs = tokenizer.batch_decode(output_ids[:, input_token_len:], skip_special_tokens=True)
        (response,) = model.process_response(outputs)
        key = f"{sample['task']}/{sample['sample_id']}"
        results.append(
            {
                "task": sample["task"],
                "sample_id": sample["sample_id"],
                "prompt": recording.texts[0],
                "input_ids": input_ids[0].tolist(),
                "new_ids": output_ids[0, input_token_len:].tolist(),
                "answer": response,
            }
        )
        pixels[key] = video
    torch.save(pixels, out / "pixels.pt")
    (out / "results.json").write_text(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, required=True, help="A Valley checkout (valley/).")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    parser.add_argument("--gen-kwargs", required=True, help="generate's keyword arguments, as JSON.")
    parser.add_argument("--keywords", required=True, help="The stop keywords, as JSON.")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    samples = json.loads(args.samples.read_text())
    keywords = json.loads(args.keywords)
    run(
        args.code.resolve(),
        args.model.resolve(),
        samples,
        json.loads(args.gen_kwargs),
        keywords,
        args.out.resolve(),
    )


if __name__ == "__main__":
    main()
