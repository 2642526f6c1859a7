"""Cheetor's own benchmark path, run by its original code (the ``cheetah`` package and ``eval_configs`` of
github.com/DCDmllm/Cheetah) in an environment of its era.

Not a kit module, and no copy of Cheetah's code: the parity test runs this file with the Python of
``.venv-cheetor`` (``.ci/cheetor-official.sh``: transformers 4.31, timm 0.4.12) and puts a checkout's
folder first on the import path, so ``cheetah`` is the original package.

The model is built as ``i4_cheetah_llama2.py`` builds it: ``eval_configs/cheetah_eval_llama2.yaml`` through
``Config.build_model_config`` (merged over ``configs/models/cheetah_llama2.yaml``) with the checkpoint's
paths, ``from_config`` (the ViT, the BLIP-2 Q-Former and query tokens, the slow ``LlamaTokenizer``, the
Llama of ``modeling_llama2.py``, VPG-C's parts, the Cheetor checkpoint with ``strict=False``), the config's
``preprocess.vis_processor.eval`` (``blip2_image_eval``) and ``Chat``; each sample is answered by
``Chat.batch_answer`` itself, given the one sample. Departures, each for the CPU, the tiny checkpoint or
MileBench's settings: no ``.to("cuda")`` and the Llama loaded in float32; ``cheetah_llama2.py`` calls
``contextlib.nullcontext()`` on the CPU without importing ``contextlib`` (on a GPU that branch is not
taken), so the module is given it; ``create_eva_vit_g`` builds the ViT with the tiny checkpoint's sizes
from its local ``eva_vit_g.pth`` instead of the hard-coded ViT-g and the LAVIS URL (the same class,
interpolation and load), and ``BertConfig.from_pretrained("bert-base-uncased")`` gives the tiny Q-Former's
sizes instead of the hub's (both read the hub); the BERT tokenizer, which inference never uses, is not
loaded (it needs the hub); ``model.eval()`` as the official MileBench worker puts its model in eval mode
(``i4_cheetah_llama2.py`` never does, so there the Q-Former, which ``BertLMHeadModel`` builds in training
mode, runs its dropout); ``update_layer`` is the tiny Llama's; ``generate`` decodes greedily with
MileBench's ``min_new_tokens`` 1 (``batch_answer`` samples with top_p 0.9), its other arguments as
``batch_answer`` passes them; torchvision's compiled operators are left out (the PyPI wheel of
torchvision 0.28 links CUDA libraries, absent with the CPU torch; Cheetor uses only its PIL transforms).
Beside each answer it writes ``probe``: ``batch_answer``'s decoding steps on the generated ids without byte
tokens, with special tokens put in (text, ``<s>``, text, ``</s>``, text), so the decoding is compared also
where a random answer's bytes are not text.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import types
from pathlib import Path

import torch

BYTE = re.compile(r"<0x[0-9A-F]{2}>")


def run(code: Path, model_dir: Path, samples: list[dict], max_new_tokens: int, out: Path) -> None:
    sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
    sys.path.insert(0, str(code))
    import cheetah.models.blip2 as blip2
    import cheetah.models.cheetah_llama2 as cheetah_llama2
    from cheetah.common.config import Config
    from cheetah.common.registry import registry
    from cheetah.conversation.conversation_llama2 import Chat
    from cheetah.models import eva_vit
    from cheetah.processors import blip_processors  # noqa: F401  (registers the processors)
    from omegaconf import OmegaConf
    from transformers import BertConfig

    sizes = json.loads((model_dir / "cheetor.json").read_text())

    sys.path.append(str(Path(__file__).parents[1]))
    from lavis_tiny import load_in_float32, tiny_bert_config, tiny_eva_vit_g

    tiny_bert = tiny_bert_config(BertConfig, sizes["qformer"])
    blip2.create_eva_vit_g = tiny_eva_vit_g(eva_vit, sizes["eva"], model_dir)
    blip2.BertConfig = tiny_bert
    cheetah_llama2.BertConfig = tiny_bert
    blip2.Blip2Base.init_tokenizer = classmethod(lambda cls: None)
    cheetah_llama2.contextlib = contextlib
    load_in_float32(cheetah_llama2.LlamaForCausalLM)

    config = OmegaConf.load(code / "eval_configs" / "cheetah_eval_llama2.yaml")
    config.model.ckpt = str(model_dir / "cheetah_llama2_7b.pth")
    config.model.llama_model = str(model_dir)
    config.model.image_size = sizes["image_size"]
    config.model.num_query_token = sizes["num_query_token"]
    config.model.q_former_model = str(model_dir / "blip2_pretrained_flant5xxl.pth")
    cfg = Config.build_model_config(config)
    model_cls = registry.get_model_class(cfg.model.arch)
    model = model_cls.from_config(cfg.model)
    model.eval()
    vis_processor_cfg = cfg.preprocess.vis_processor.eval
    vis_processor_cfg.image_size = sizes["image_size"]
    vis_processor = registry.get_processor_class(vis_processor_cfg.name).from_config(vis_processor_cfg)
    chat = Chat(model, vis_processor, device="cpu")

    seen: dict = {}
    processed = chat.vis_processor

    def recording_processor(image):
        pixels = processed(image)
        seen.setdefault("pixels", []).append(pixels)
        return pixels

    chat.vis_processor = recording_processor
    get_context_emb = chat.batch_get_context_emb

    def recording_context(split_prompt, img_list, img_attns):
        seen["split_prompt"] = split_prompt
        return get_context_emb(split_prompt, img_list, img_attns)

    chat.batch_get_context_emb = recording_context
    generate = model.llama_model.generate

    def benchmark_generate(**kwargs):
        seen["embeds"] = kwargs["inputs_embeds"][0].clone()
        seen["spans"] = kwargs["image_position_list"]
        seen["vit"] = kwargs["all_image_embeds"][0]
        output = generate(**{**kwargs, "do_sample": False, "min_new_tokens": 1})
        seen["output"] = output[0].tolist()
        return output

    model.llama_model.generate = benchmark_generate

    results, tensors = [], {}
    for sample in samples:
        seen.clear()
        question = sample["prompt"].replace("<ImageHere><ImageHere>", "<ImageHere>\n<ImageHere>\n")
        with torch.no_grad():
            (answer,) = chat.batch_answer(
                batch_raw_img_list=[sample["images"]],
                batch_context=[question],
                max_new_tokens=max_new_tokens,
                max_length=5000,
                update_layer=sizes["update_layer"],
            )
        (pieces,) = seen["split_prompt"]
        segments = [
            model.llama_tokenizer(seg, return_tensors="pt", add_special_tokens=i == 0).input_ids[0].tolist()
            for i, seg in enumerate(pieces)
        ]
        tokenizer = model.llama_tokenizer
        plain = [i for i in seen["output"][1:] if not BYTE.fullmatch(tokenizer.convert_ids_to_tokens(i))]
        probe = [*plain, tokenizer.bos_token_id, *plain[:4], tokenizer.eos_token_id, *plain[:2]]
        key = f"{sample['task']}/{sample['sample_id']}"
        results.append(
            {
                "task": sample["task"],
                "sample_id": sample["sample_id"],
                "text": "<HereForImage>".join(pieces),
                "input_ids": [i for n, seg in enumerate(segments) for i in ([-200] if n else []) + seg],
                "new_ids": seen["output"],
                "answer": answer,
                "probe": tokenizer.decode(torch.tensor(probe), add_special_tokens=False).split("</s>")[0],
            }
        )
        tensors[key] = {
            "pixel_values": torch.stack(seen["pixels"]),
            "inputs_embeds": seen["embeds"],
            "vit_features": seen["vit"].clone(),
            "image_spans": torch.tensor(seen["spans"], dtype=torch.long).reshape(-1, 2),
        }
    torch.save(tensors, out / "tensors.pt")
    (out / "results.json").write_text(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--code", type=Path, required=True, help="A Cheetah checkout (cheetah/, eval_configs/)."
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
