"""Host side of the official-execution parity check: the official environment, the llava-hf style copy
of the original checkpoint, and the id form of each side.

The official stack runs in its own virtual environment (``.ci/llava-official.sh`` makes
``.venv-llava``; ``MILEBENCH_LLAVA_PYTHON`` names another interpreter). The kit reads the llava-hf
conversion of a checkpoint, so the test converts the tiny original one the way
``convert_llava_weights_to_hf`` does: the same tensors under transformers' names, ``<image>`` and
``<pad>`` added to the tokenizer, the embeddings grown to a multiple of 64 with rows drawn near their
mean.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import (
    AutoTokenizer,
    CLIPImageProcessor,
    CLIPVisionModel,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
)

from milebench.benchmarks.milebench.fixture.prepared import prepared_fixture
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import regime_for
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import FixtureSource, Mode, RunSpec
from milebench.spec.model import ModelSpec

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("official_worker.py")
PYTHON_VAR = "MILEBENCH_LLAVA_PYTHON"
OFFICIAL_IMAGE_ID = -200
"""llava.constants.IMAGE_TOKEN_INDEX: one id per image in the official input ids."""
PAD_MULTIPLE = 64


def official_python() -> Path | None:
    """The interpreter of the official environment, when one is installed."""
    named = os.environ.get(PYTHON_VAR)
    path = Path(named) if named else REPO / ".venv-llava/bin/python"
    return path if path.is_file() else None


def official(python: Path, *args: str) -> None:
    """Run the official worker script; its output is shown when it fails."""
    done = subprocess.run([str(python), str(WORKER), *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"official worker {args[0]} failed:\n{done.stdout}\n{done.stderr}")


def build_original(python: Path, out: Path, corpus: Sequence[str]) -> None:
    out.mkdir(parents=True)
    (out / "corpus.json").write_text(json.dumps(list(corpus)))
    official(python, "build", "--out", str(out), "--corpus", str(out / "corpus.json"))


def grown(rows: torch.Tensor, size: int, generator: torch.Generator) -> torch.Tensor:
    """``rows`` grown to ``size`` rows drawn near their mean, as the llava-hf conversion grows them."""
    extra = size - rows.shape[0]
    spread = rows.std(dim=0) * 1e-2
    noise = torch.randn(extra, rows.shape[1], generator=generator) * spread
    return torch.cat([rows, rows.mean(dim=0) + noise])


def convert_to_hf(built: Path, out: Path) -> None:
    """The llava-hf layout of the tiny original checkpoint in ``built``, written to ``out``."""
    original = json.loads((built / "llava-v1.5-tiny/config.json").read_text())
    weights = load_file(built / "llava-v1.5-tiny/model.safetensors")
    tower = CLIPVisionModel.from_pretrained(built / "clip-vision-tower")
    tokenizer = AutoTokenizer.from_pretrained(built / "hf-tokenizer")
    size = -(-len(tokenizer) // PAD_MULTIPLE) * PAD_MULTIPLE
    text = LlamaConfig(
        **{
            key: original[key]
            for key in (
                "hidden_size",
                "intermediate_size",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
                "max_position_embeddings",
                "rms_norm_eps",
                "rope_theta",
                "bos_token_id",
                "eos_token_id",
            )
        },
        vocab_size=size,
        pad_token_id=tokenizer.pad_token_id,
    )
    config = LlavaConfig(
        vision_config=tower.config,
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=original["mm_vision_select_layer"],
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
    )
    model = LlavaForConditionalGeneration(config)
    generator = torch.Generator().manual_seed(0)
    language = {
        key.removeprefix("model."): value
        for key, value in weights.items()
        if key.startswith("model.") and ".mm_projector." not in key
    }
    language["embed_tokens.weight"] = grown(language["embed_tokens.weight"], size, generator)
    model.model.language_model.load_state_dict(language)
    model.lm_head.load_state_dict({"weight": grown(weights["lm_head.weight"], size, generator)})
    projector = {
        f"linear_{i}.{part}": weights[f"model.mm_projector.{layer}.{part}"]
        for i, layer in ((1, 0), (2, 2))
        for part in ("weight", "bias")
    }
    model.model.multi_modal_projector.load_state_dict(projector)
    model.model.vision_tower.load_state_dict(tower.state_dict())
    model.save_pretrained(out)
    image_processor = CLIPImageProcessor.from_pretrained(built / "clip-vision-tower")
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=tower.config.patch_size,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        image_token="<image>",
    )
    processor.save_pretrained(out)
    image_processor.save_pretrained(out)


def collapse_images(ids: Sequence[int], image_id: int, per_image: int) -> list[int]:
    """The kit's ids in the official form: each run of ``per_image`` image ids becomes one -200."""
    out: list[int] = []
    i = 0
    while i < len(ids):
        if ids[i] == image_id:
            assert list(ids[i : i + per_image]) == [image_id] * per_image, f"short image run at {i}"
            out.append(OFFICIAL_IMAGE_ID)
            i += per_image
        else:
            out.append(ids[i])
            i += 1
    return out


BYTE_TOKEN = re.compile(r"^<0x([0-9A-F]{2})>$")


def broken_byte_runs(tokens: Sequence[str]) -> bool:
    """Whether some run of consecutive byte-fallback tokens (``<0xNN>``) is not valid UTF-8."""
    run: list[int] = []
    for token in [*tokens, ""]:
        match = BYTE_TOKEN.match(token)
        if match:
            run.append(int(match.group(1), 16))
            continue
        try:
            bytes(run).decode("utf-8")
        except UnicodeDecodeError:
            return True
        run = []
    return False


def for_tokenizers_0_15(folder: Path) -> None:
    """A kit-built tokenizer's files as tokenizers 0.15 and transformers 4.37 read them: BPE merges as
    space-joined strings, the tokenizer class by its 4.37 name. Vocabulary and merges stay the same."""
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["model"]["merges"] = [" ".join(pair) for pair in tokenizer["model"]["merges"]]
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


PARITY_THREADS = 2
"""The CPU threads of both sides of a parity comparison (and of every golden fixture's recording)."""


def run_original(python: Path, driver: Path, *args: str) -> None:
    """Run an original-code driver in the official environment at ``PARITY_THREADS`` threads; its output
    is shown when it fails."""
    threads = dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS"), str(PARITY_THREADS))
    done = subprocess.run(
        [str(python), str(driver), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **threads},
    )
    if done.returncode:
        raise RuntimeError(f"{driver.name} failed:\n{done.stdout}\n{done.stderr}")


def listed_fixture(spec: ModelSpec, paths: RunPaths, per_task: int, out: Path) -> list[PreparedSample]:
    """Samples of every mini-MileBench task prepared for ``spec``'s regime, listed in ``out`` for a driver
    (task, sample_id, prompt, absolute image paths)."""
    specs = load_specs()
    run = RunSpec(name="t", description="t", models=(spec.name,), data=FixtureSource(kind="fixture"))
    regime = regime_for(spec, run, Mode.MULTI_IMAGE, specs.root)
    tasks = prepared_fixture(paths, list(specs.tasks.values()), per_task, regime=regime)
    samples = [s for task in tasks.values() for s in task]
    listed = [
        {
            "task": s.task,
            "sample_id": s.sample_id,
            "prompt": s.prompt,
            "images": [str(paths.data_root / rel) for rel in s.images],
        }
        for s in samples
    ]
    out.write_text(json.dumps(listed))
    return samples
