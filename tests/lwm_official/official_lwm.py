"""LWM's own inference path, run by its original code (the ``lwm`` package of
github.com/LargeWorldModel/LWM at 59d4dbe, JAX on the CPU) in an environment of its era.

Not a kit module, and no copy of LWM's code: the parity test runs this file with the Python of
``.venv-lwm`` (``.ci/lwm-official.sh``) and puts a checkout's folder first on the import path.

The ``Sampler`` of ``lwm/vision_chat.py`` is built as ``scripts/run_vision_chat.sh`` builds it (its flags,
the checkpoint's ``params``, ``vqgan`` and ``tokenizer.model``; the config read with the original's
``load_llama_config='json::config.json'``). Per sample, ``construct_input``'s steps with each picture as
one-frame vision: ``<s>You are a helpful assistant. USER: {question}\\n`` (the prompt with its image
placeholders taken out), then per picture ``<vision>``, its ``_read_process_vision`` tokens (256 VQGAN
codes and ``<eov>``, the vision mask set) and ``</vision>``, then `` ASSISTANT:``; left-padded to the
Sampler's length; the model's ``generate`` under the Sampler's mesh; the new ids cut after the first EOS and
decoded as ``Sampler.__call__`` decodes them. Departures, each for the CPU, the tiny checkpoint, Python
3.11 or the comparison: greedy decoding with the benchmark's limit instead of sampling at temperature 0.2
with ``max_new_tokens=block_size``; several visions in one prompt (``construct_input`` takes one); the
tiny VQGAN's sizes given to ``VQGANConfig.get_default_config`` through its own ``updates`` argument
(``VQGAN`` reads no config); tux 0.0.2 (PyPI's; the requirements name tux's git HEAD) with three shims:
``inspect.getargspec`` (gone in Python 3.11) as ``getfullargspec``, ``jnp.DeviceArray`` (gone in JAX 0.4.23,
in an annotation) as ``jax.Array``, and ``load_trainstate_checkpoint`` without ``max_buffer_size`` (a read
buffer size its release lacks).

With ``--frames`` (the kit's ``video-frames`` variant) each sample is one vision through
``_read_process_vision``'s video path: the sample's pictures stand in for the frames decord would decode
(``decord.VideoReader`` replaced by a reader of a listing of the pictures, each frame the picture as an RGB
array at its own size), so that function picks ``max_n_frames`` of them (8, run_vision_chat.sh's flag) by
its ``np.linspace`` when there are more, ``_process_frame``s and encodes them one at a time and closes
each with its end token; the frames fed to the VQGAN are those its ``encode`` was called with. The prompt
writes the vision as the numbers of the pictures kept.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import sys
from pathlib import Path
from typing import ClassVar

import numpy as np


def shim() -> None:
    inspect.getargspec = inspect.getfullargspec  # type: ignore[attr-defined]
    import jax
    import jax.numpy as jnp

    jnp.DeviceArray = jax.Array


class Listing:
    """What stands in for ``decord.VideoReader``: a video whose frames are the pictures a file lists;
    ``last`` keeps the frame ids ``_read_process_vision`` asked for."""

    last: ClassVar[list[int]] = []

    def __init__(self, f, ctx=None):
        from PIL import Image

        self.frames = [np.asarray(Image.open(p).convert("RGB")) for p in json.loads(f.read())]

    def __len__(self) -> int:
        return len(self.frames)

    def get_batch(self, ids):
        Listing.last = list(ids)
        return Decoded([self.frames[i] for i in ids])


class Decoded:
    """``get_batch``'s answer: the frames, each at its picture's size."""

    def __init__(self, frames):
        self.frames = frames

    def asnumpy(self):
        return self.frames


def run(
    code: Path, model_dir: Path, samples: list[dict], max_new_tokens: int, out: Path, frames_mode: bool
) -> None:
    shim()
    sys.path.insert(0, str(code))
    import jax
    import torch
    from jax.experimental.pjit import pjit
    from jax.sharding import PartitionSpec as PS
    from lwm import vqgan
    from transformers import GenerationConfig
    from tux import StreamingCheckpointer

    original_load = StreamingCheckpointer.load_trainstate_checkpoint.__func__

    def load(cls, load_from, **kwargs):
        kwargs.pop("max_buffer_size", None)
        return original_load(cls, load_from, **kwargs)

    StreamingCheckpointer.load_trainstate_checkpoint = classmethod(load)
    sizes = {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in json.loads((model_dir / "vqgan_config.json").read_text()).items()
    }
    default = vqgan.VQGANConfig.get_default_config.__func__
    vqgan.VQGANConfig.get_default_config = classmethod(lambda cls, updates=None: default(cls, sizes))

    # ml_collections reads the config overrides (--tokenizer.vocab_file) from sys.argv when the flags are
    # defined, at the import of vision_chat, as under `python -m lwm.vision_chat`.
    sys.argv = [
        "vision_chat",
        "--prompt=unused",
        "--input_file=unused",
        f"--vqgan_checkpoint={model_dir / 'vqgan'}",
        "--mesh_dim=!1,1,-1,1",
        "--dtype=fp32",
        f"--load_llama_config=json::{model_dir / 'config.json'}",
        "--max_n_frames=8",
        "--update_llama_config=dict(sample_mode='text',scan_attention=False,scan_query_chunk_size=128,"
        "scan_key_chunk_size=128,remat_attention='',scan_mlp=False,scan_mlp_chunk_size=2048,remat_mlp='',"
        "remat_block='',scan_layers=True)",
        f"--load_checkpoint=params::{model_dir / 'params'}",
        f"--tokenizer.vocab_file={model_dir / 'tokenizer.model'}",
    ]
    from lwm import vision_chat

    vision_chat.FLAGS(sys.argv)
    vision_chat.set_random_seed(vision_chat.FLAGS.seed)  # as main() does
    sampler = vision_chat.Sampler()
    tokenizer = sampler.tokenizer

    def generate(params, batch):
        return sampler.model.generate(
            batch["input_ids"],
            vision_masks=batch["vision_masks"],
            attention_mask=batch["attention_mask"],
            params=params["params"],
            generation_config=GenerationConfig(
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
                do_sample=False,
            ),
        ).sequences[:, batch["input_ids"].shape[1] :]

    forward = pjit(generate, in_shardings=(sampler.model_ps, PS()), out_shardings=PS())
    results, pixels, all_codes = [], {}, {}
    vision_chat.decord.VideoReader = Listing
    max_n_frames = vision_chat.FLAGS.max_n_frames
    fed: list[np.ndarray] = []
    encode = sampler.vqgan.encode

    def recording(pixel_values):
        fed.append(np.asarray(pixel_values))
        return encode(pixel_values)

    sampler.vqgan.encode = recording
    per_frame = sampler.n_tokens_per_frame
    for n, sample in enumerate(samples):
        question = sample["prompt"].replace("<ImageHere>", "")
        text_1 = f"<s>You are a helpful assistant. USER: {question}\n"
        tokens, vm = list(tokenizer.encode(text_1)), [False] * len(tokenizer.encode(text_1))
        start, end = tokenizer.encode("<vision>"), tokenizer.encode("</vision>")
        fed.clear()
        if frames_mode:
            listing = out / f"{n}.frames"  # neither .png nor .jpg: read as a video
            listing.write_text(json.dumps(sample["images"]))
            visions = [sampler._read_process_vision(str(listing), max_n_frames)] if sample["images"] else []
            written = [" ".join(map(str, Listing.last))] if sample["images"] else []
        else:
            visions = [sampler._read_process_vision(path, 8) for path in sample["images"]]
            written = [str(k) for k in range(len(visions))]
        codes = []
        for vision in visions:
            codes += [vision[k : k + per_frame - 1] for k in range(0, len(vision), per_frame)]
            tokens += start + vision + end
            vm += [False] * len(start) + [True] * len(vision) + [False] * len(end)
        tail = tokenizer.encode(" ASSISTANT:")
        tokens += tail
        vm += [False] * len(tail)
        # construct_input's length (its max_n_frames the sample's pictures, or the flag's for a video), or
        # the tokens' if more
        frames_limit = max_n_frames if frames_mode else len(sample["images"])
        length = max(frames_limit * per_frame + sampler.min_buffer_size, len(tokens) + 1)
        length = int(math.ceil(length / sampler.block_size) * sampler.block_size)
        batch = {
            "input_ids": np.zeros((1, length), dtype=int),
            "vision_masks": np.zeros((1, length), dtype=bool),
            "attention_mask": np.zeros((1, length), dtype=int),
        }
        batch["input_ids"][0, -len(tokens) :] = tokens
        batch["vision_masks"][0, -len(tokens) :] = vm
        batch["attention_mask"][0, -len(tokens) :] = 1
        with sampler.mesh:
            output = jax.device_get(forward(sampler.params, batch))[0].tolist()
        if tokenizer.eos_token_id in output:
            output = output[: output.index(tokenizer.eos_token_id) + 1]
        (text,) = tokenizer.batch_decode([output], skip_special_tokens=True)
        text = text.split(tokenizer.eos_token, maxsplit=1)[0]
        key = f"{sample['task']}/{sample['sample_id']}"
        results.append(
            {
                "task": sample["task"],
                "sample_id": sample["sample_id"],
                "prompt": text_1 + "".join(f"<vision>{w}</vision>" for w in written) + " ASSISTANT:",
                "input_ids": tokens,
                "vision_mask": vm,
                "new_ids": output,
                "answer": text,
            }
        )
        pixels[key] = torch.from_numpy(np.concatenate(fed) if fed else np.zeros((0, 256, 256, 3), np.float32))
        all_codes[key] = codes
    torch.save(pixels, out / "pixels.pt")
    (out / "codes.json").write_text(json.dumps(all_codes))
    (out / "results.json").write_text(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, required=True, help="An LWM checkout (lwm/).")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument(
        "--samples", type=Path, required=True, help="JSON list of task, sample_id, prompt, images."
    )
    parser.add_argument("--max-new-tokens", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--frames", action="store_true", help="All pictures as the frames of one video (video-frames)."
    )
    args = parser.parse_args()
    run(
        args.code.resolve(),
        args.model.resolve(),
        json.loads(args.samples.read_text()),
        args.max_new_tokens,
        args.out.resolve(),
        args.frames,
    )


if __name__ == "__main__":
    main()
