"""The official MileBench LLaVA path, run by the ``llava`` package (llava-torch) in its own environment.

Not a kit module: the parity test runs this file with the Python of an environment holding the
official stack (transformers 4.37, tokenizers 0.15, sentencepiece, llava-torch; ``.ci/llava-official.sh``
makes one), since that stack cannot share the kit's.

``build``: a tiny original-format LLaVA-1.5 checkpoint, built offline the way the released ones are laid
out: a LlavaLlamaForCausalLM with an MLP projector whose config names a CLIP vision tower folder
(``mm_vision_tower``), ``image_aspect_ratio: pad``, and a slow SentencePiece Llama tokenizer trained on
the given corpus with Llama's settings. It also writes the tokenizer the llava-hf conversion makes of it
(fast, with ``<image>`` and ``<pad>`` added) for the kit's copy.

``run``: per sample, the steps of MileBench's ``workers/model_workers.py`` ``LLaVA.forward`` in its
order, through llava's own functions: ``load_pretrained_model``, ``conv_templates["llava_llama_2"]``,
``process_images``, the CLEVR-Change fix, ``tokenizer_image_token``, ``generate`` under
``torch.autocast("cuda", bfloat16)`` with ``KeywordsStoppingCriteria([sep])``, then
``decode(skip_special_tokens=True).strip()``. On a CPU the autocast does nothing and the float16 model
the builder returns is made float32 (``--float32``), the one step that differs from a GPU run.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import sentencepiece as spm
import torch
from PIL import Image
from transformers import (
    AddedToken,
    CLIPImageProcessor,
    CLIPVisionConfig,
    CLIPVisionModel,
    LlamaTokenizer,
    LlamaTokenizerFast,
)

HIDDEN = 32
IMAGE_SIZE = 32
PATCH = 8
VOCAB = 700
INIT_RANGE = 0.5
"""Weights far from zero give well separated logits, so greedy choices do not hinge on rounding."""


def train_tokenizer(corpus: list[str], out: Path) -> None:
    """A SentencePiece BPE model with the settings of Llama's tokenizer.model, saved as a slow tokenizer."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_writer=model,
        vocab_size=VOCAB,
        model_type="bpe",
        byte_fallback=True,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        add_dummy_prefix=True,
        character_coverage=1.0,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        num_threads=1,
        minloglevel=2,
    )
    (out / "tokenizer.model").write_bytes(model.getvalue())
    LlamaTokenizer(vocab_file=str(out / "tokenizer.model"), legacy=False).save_pretrained(out)


def half_exact(model: torch.nn.Module) -> torch.nn.Module:
    """Weights rounded to float16 values (kept float32): the builder's float16 load then loses nothing,
    so the official model cast back to float32 holds exactly the tensors the kit loads."""
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(param.half().float())
    return model


def build(out: Path, corpus: list[str], seed: int) -> None:
    from llava.model.language_model.llava_llama import LlavaConfig, LlavaLlamaForCausalLM

    original, clip, hf_tokenizer = out / "llava-v1.5-tiny", out / "clip-vision-tower", out / "hf-tokenizer"
    for folder in (original, clip, hf_tokenizer):
        folder.mkdir(parents=True)
    train_tokenizer(corpus, original)
    tokenizer = LlamaTokenizer.from_pretrained(original)

    torch.manual_seed(seed)
    tower = CLIPVisionConfig(
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=IMAGE_SIZE,
        patch_size=PATCH,
        projection_dim=HIDDEN,
        initializer_range=INIT_RANGE,
    )
    half_exact(CLIPVisionModel(tower)).save_pretrained(clip)
    CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    ).save_pretrained(clip)

    config = LlavaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        initializer_range=INIT_RANGE,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        mm_vision_tower=str(clip),
        mm_hidden_size=HIDDEN,
        mm_projector_type="mlp2x_gelu",
        mm_vision_select_layer=-2,
        mm_vision_select_feature="patch",
        mm_patch_merge_type="flat",
        image_aspect_ratio="pad",
        mm_use_im_start_end=False,
        mm_use_im_patch_token=False,
        tokenizer_padding_side="right",
    )
    half_exact(LlavaLlamaForCausalLM(config)).save_pretrained(original)

    fast = LlamaTokenizerFast.from_pretrained(original, from_slow=True, legacy=False)
    fast.add_tokens(AddedToken("<image>", special=True, normalized=False), special_tokens=True)
    fast.add_special_tokens({"pad_token": "<pad>"})
    fast.save_pretrained(hf_tokenizer)


def to_float32(model: torch.nn.Module) -> None:
    """The float16 model as float32. Casting alone is not enough: transformers 4.37 built each rotary
    table under the float16 default dtype of the load, so the tables are rebuilt in float32."""
    model.float()
    for module in model.modules():
        if hasattr(module, "_set_cos_sin_cache"):
            module._set_cos_sin_cache(module.max_seq_len_cached, module.inv_freq.device, torch.float32)


def run(model_dir: Path, samples: list[dict], gen_kwargs: dict, float32: bool, out: Path) -> None:
    from llava.constants import DEFAULT_IMAGE_TOKEN, IMAGE_TOKEN_INDEX
    from llava.conversation import SeparatorStyle, conv_templates
    from llava.mm_utils import KeywordsStoppingCriteria, process_images, tokenizer_image_token
    from llava.model.builder import load_pretrained_model

    device = "cpu"
    tokenizer, model, processor, _ = load_pretrained_model(
        model_path=str(model_dir), model_base=None, model_name=str(model_dir), device_map=device
    )
    if float32:
        to_float32(model)
    template = conv_templates["llava_llama_2"]
    stop = template.sep if template.sep_style != SeparatorStyle.TWO else template.sep2
    model.eval()

    results, pixels = [], {}
    for sample in samples:
        conv = template.copy()
        pictures = [Image.open(path).convert("RGB") for path in sample["images"]]
        image_tensor = process_images(pictures, processor, model.config).to(device)
        question = sample["prompt"].replace("<ImageHere><ImageHere>", "<ImageHere>\n<ImageHere>\n")
        conv.append_message(conv.roles[0], question.replace("<ImageHere>", DEFAULT_IMAGE_TOKEN))
        conv.append_message(conv.roles[1], None)
        prompt = conv.get_prompt()
        input_ids = tokenizer_image_token(prompt, tokenizer, IMAGE_TOKEN_INDEX, return_tensors="pt")[None]
        criterion = KeywordsStoppingCriteria([stop], tokenizer, input_ids)
        with torch.inference_mode(), torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            output_ids = model.generate(
                input_ids, images=image_tensor, use_cache=True, stopping_criteria=[criterion], **gen_kwargs
            )
        results.append(
            {
                "sample_id": sample["sample_id"],
                "task": sample["task"],
                "prompt": prompt,
                "input_ids": input_ids[0].tolist(),
                "output_ids": output_ids[0].tolist(),
                "answer": tokenizer.decode(output_ids[0], skip_special_tokens=True).strip(),
            }
        )
        pixels[f"{sample['task']}/{sample['sample_id']}"] = image_tensor
    torch.save(pixels, out / "pixels.pt")
    (out / "results.json").write_text(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--corpus", type=Path, required=True, help="JSON list of training texts.")
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("run")
    p.add_argument("--model", type=Path, required=True)
    p.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    p.add_argument("--gen-kwargs", type=json.loads, required=True)
    p.add_argument("--float32", action="store_true")
    p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "build":
        build(args.out, json.loads(args.corpus.read_text()), args.seed)
    else:
        run(args.model, json.loads(args.samples.read_text()), args.gen_kwargs, args.float32, args.out)


if __name__ == "__main__":
    main()
