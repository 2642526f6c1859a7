"""VILA's own inference path, run by its original code (the llava package of
github.com/Efficient-Large-Model/VILA) in the environment of its era.

Not a kit module, and no copy of VILA's code: the parity test runs this file with the Python of
``.venv-vila`` (``.ci/vila-official.sh``: transformers 4.36.2, tokenizers 0.15) and puts a checkout's root
first on the import path, so ``llava`` is VILA's package.

Per sample, ``llava/eval/run_llava.py``'s steps in MileBench's worker loop: ``load_pretrained_model`` once,
the worker's CLEVR-Change fix and ``<ImageHere>`` -> ``<image>``, ``conv_templates["vicuna_v1"]`` (the
README's ``--conv-mode``), ``process_images``, ``tokenizer_image_token``, ``generate`` with
``KeywordsStoppingCriteria`` and ``use_cache``, then ``batch_decode`` of the new ids, strip, a trailing
keyword cut, strip. As VILA's ``environment_setup.sh`` copies ``llava/train/transformers_replace`` over
transformers' Llama, this driver loads that replaced ``modeling_llama`` in place of transformers' own
(without writing into the environment). Three steps differ from a GPU run, all for the CPU: the float16
loads and casts (``torch_dtype``, ``.to(dtype=torch.float16)``) are float32, ``.to("cuda")`` goes to the
CPU, and ``flash_attn``, which the replaced Llama imports and always attends with (CUDA only), is given
torch's exact attention with flash-attention's causal alignment (a query attends to every key up to its
own position counted from the end, so one new token attends to the whole cache).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import math
import os
import sys
import types
from pathlib import Path
from typing import Any

import torch
from PIL import Image

LLAMA = "transformers.models.llama.modeling_llama"
REPLACED_LLAMA = Path("llava/train/transformers_replace/llama/modeling_llama.py")


def flash_attn_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
) -> torch.Tensor:
    """flash-attn 2's ``flash_attn_func`` on (batch, length, heads, head_dim) tensors, in torch."""
    query, key, value = (t.transpose(1, 2) for t in (q, k, v))
    lq, lk = query.shape[-2], key.shape[-2]
    scale = softmax_scale if softmax_scale is not None else 1 / math.sqrt(query.shape[-1])
    mask = torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq) if causal else None
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=dropout_p, scale=scale
    )
    return out.transpose(1, 2)


def unpadded_only(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("padded batches: the parity runs one unpadded sample at a time")


def install_flash_attn() -> None:
    package = types.ModuleType("flash_attn")
    package.flash_attn_func = flash_attn_func  # type: ignore[attr-defined]
    package.flash_attn_varlen_func = unpadded_only  # type: ignore[attr-defined]
    padding = types.ModuleType("flash_attn.bert_padding")
    for name in ("index_first_axis", "pad_input", "unpad_input"):
        setattr(padding, name, unpadded_only)
    for module in (package, padding):
        # A spec, so transformers' availability probe finds the module, then no installed distribution.
        module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
        sys.modules[module.__name__] = module


def install_replaced_llama(code: Path) -> None:
    """VILA's ``modeling_llama`` as transformers' module, before anything imports the Llama classes."""
    import transformers.models.llama  # noqa: F401 (the package the module belongs to)

    spec = importlib.util.spec_from_file_location(LLAMA, code / REPLACED_LLAMA)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[LLAMA] = module
    spec.loader.exec_module(module)


def cpu_float32() -> None:
    """The original's float16 loads and casts and its ``cuda`` device, as float32 on the CPU."""
    from transformers import PreTrainedModel

    move = torch.nn.Module.to

    def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
        if kwargs.get("device") == "cuda":
            kwargs["device"] = "cpu"
        if kwargs.get("dtype") is torch.float16:
            kwargs["dtype"] = torch.float32
        return move(self, *args, **kwargs)

    torch.nn.Module.to = to  # type: ignore[method-assign]
    load = PreTrainedModel.from_pretrained.__func__  # type: ignore[attr-defined]

    def from_pretrained(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("torch_dtype") is torch.float16:
            kwargs["torch_dtype"] = torch.float32
        return load(cls, *args, **kwargs)

    PreTrainedModel.from_pretrained = classmethod(from_pretrained)  # type: ignore[method-assign]


def run(
    code: Path, model_dir: Path, samples: list[dict], gen_kwargs: dict, keywords: list[str], out: Path
) -> None:
    install_flash_attn()
    install_replaced_llama(code)
    sys.path.insert(0, str(code))
    from llava.constants import DEFAULT_IMAGE_TOKEN, IMAGE_TOKEN_INDEX
    from llava.conversation import conv_templates
    from llava.mm_utils import (
        KeywordsStoppingCriteria,
        get_model_name_from_path,
        process_images,
        tokenizer_image_token,
    )
    from llava.model.builder import load_pretrained_model

    cpu_float32()
    # build_vision_tower resolves the config's mm_vision_tower against the working directory; the tiny
    # checkpoint names its own folder, so the model is loaded from inside it.
    os.chdir(model_dir)
    name = get_model_name_from_path(str(model_dir))
    tokenizer, model, image_processor, _ = load_pretrained_model(str(model_dir), None, name, device="cpu")
    model.eval()

    results, pixels = [], {}
    for sample in samples:
        question = sample["prompt"].replace("<ImageHere><ImageHere>", "<ImageHere>\n<ImageHere>\n")
        conv = conv_templates["vicuna_v1"].copy()
        conv.append_message(conv.roles[0], question.replace("<ImageHere>", DEFAULT_IMAGE_TOKEN))
        conv.append_message(conv.roles[1], None)
        prompt = conv.get_prompt()
        pictures = [Image.open(path).convert("RGB") for path in sample["images"]]
        images_tensor = process_images(pictures, image_processor, model.config)
        input_ids = tokenizer_image_token(prompt, tokenizer, IMAGE_TOKEN_INDEX, return_tensors="pt")[None]
        criterion = KeywordsStoppingCriteria(keywords, tokenizer, input_ids)
        with torch.inference_mode():
            output_ids = model.generate(
                input_ids, images=images_tensor, use_cache=True, stopping_criteria=[criterion], **gen_kwargs
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
        pixels[f"{sample['task']}/{sample['sample_id']}"] = images_tensor
    torch.save(pixels, out / "pixels.pt")
    (out / "results.json").write_text(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, required=True, help="A VILA checkout's root (holding llava/).")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    parser.add_argument("--gen-kwargs", type=json.loads, required=True)
    parser.add_argument("--keywords", type=json.loads, required=True, help="JSON list of stop keywords.")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    samples = json.loads(args.samples.read_text())
    code, model, out = (p.resolve() for p in (args.code, args.model, args.out))
    run(code, model, samples, args.gen_kwargs, args.keywords, out)


if __name__ == "__main__":
    main()
