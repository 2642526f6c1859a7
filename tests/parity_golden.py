"""Golden parity fixtures: what a port's original code produced on its tiny checkpoint, kept as test data
(``tests/golden/parity/<family>.json``), so the parity test holds the kit to the original code where that
code cannot be fetched (CI reaches no GitHub).

A fixture holds, per sample, the inputs the original was given (the prepared sample's prompt and image
hashes), the text it built, its input ids, each vision tensor's shape, dtype and sha256 of its bytes (and
one sha256 per picture, so a difference names the picture), the generated ids and the decoded answer;
and, once, the original code's repository and commit, the settings of the run, the hash of the tiny
checkpoint both sides read, and the environments it was recorded in (the original's and the kit's, which
built the checkpoint and the pictures).

Fixtures are written only by the live comparison, from the original side's outputs, when the original
code is present and ``MILEBENCH_RECORD_PARITY=1`` is set; never by hand. The same comparison checks the
kit against a live original run and against a fixture, so both say what differs in the same words:
which sample, which field, the first differing position.

Bytes are compared exactly, not rounded: the tiny checkpoints run float32 on the CPU, at ``PARITY_THREADS``
CPU threads on both sides (the kit's in the tests' ``parity_threads`` fixture, the original's through
``run_original``'s environment): ids, pixel bytes and generated ids come out the same at any thread count,
but some families' float tensors (VideoChat2's input embeddings) change bytes with it. What a fixture
cannot pin is the environment that builds the checkpoint and the pictures; a mismatch message shows both
environments, and a different checkpoint shows as ``meta: checkpoint_sha256``.

A port's test: ``set_up`` builds what both sides read (``Setup``); a module fixture gives the kit's
``Observed`` per sample in the original's form; the live test calls ``require_original`` (skips, saying
why, without the code), runs the original's driver, reads it with ``original_outputs`` and calls
``compare_live`` (which records when asked); the golden test calls ``assert_matches``. The live test comes
first in the file, so a re-recording is what the golden test then reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from llava_official.parity import listed_fixture
from pydantic import BaseModel, ConfigDict, ValidationError
from safetensors import safe_open

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.records import PreparedSample
from milebench.infer.tiny import build_tiny
from milebench.io import canonical_json
from milebench.spec.model import ModelSpec

GOLDEN_DIR = Path(__file__).parent / "golden" / "parity"
RECORD_VAR = "MILEBENCH_RECORD_PARITY"
PINS = Path(__file__).resolve().parents[1] / ".ci" / "original-code.sh"
PACKAGES = ("torch", "transformers", "tokenizers", "pillow", "numpy")
"""The packages whose versions a fixture records for each side."""
SHOWN = 8
"""Differences listed before the rest are counted."""


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TensorPrint(Frozen):
    """A tensor as a fixture keeps it: exact, without its values."""

    shape: tuple[int, ...]
    dtype: str
    sha256: str
    items: tuple[str, ...]
    """sha256 of each slice along the first dimension (each picture of a pixel tensor)."""


class SampleInputs(Frozen):
    """What the original was given: the prepared sample, by its hashes."""

    prompt_sha256: str
    image_sha256: tuple[str, ...]


class GoldenSample(Frozen):
    inputs: SampleInputs
    text: str
    input_ids: tuple[int, ...]
    vision: dict[str, TensorPrint]
    new_ids: tuple[int, ...]
    answer: str


class Meta(Frozen):
    """What a run of either side must share with the fixture for the comparison to mean anything."""

    repository: str
    commit: str
    checkpoint_sha256: str
    settings: dict[str, Any]


class Golden(Frozen):
    family: str
    meta: Meta
    original_environment: dict[str, str]
    kit_environment: dict[str, str]
    samples: dict[str, GoldenSample]


@dataclass(frozen=True)
class Observed:
    """One side's outputs on one sample, in the original code's form (the test maps the kit's to it)."""

    sample: PreparedSample
    text: str
    input_ids: Sequence[int]
    vision: Mapping[str, torch.Tensor]
    new_ids: Sequence[int]
    answer: str


@dataclass(frozen=True)
class Setup:
    """What both sides of a parity test read."""

    paths: RunPaths
    """The kit's run layout, holding the tiny checkpoint and the mini-MileBench."""
    samples: list[PreparedSample]
    original: Path
    """The original side's copy of the tiny checkpoint."""
    listed: Path
    """The samples listed for the original side's driver (``listed_fixture``)."""
    meta: Meta


def set_up(
    root: Path,
    spec: ModelSpec,
    per_task: int,
    for_original: Callable[[Path], None],
    repository: str,
    commit: str,
    settings: Mapping[str, Any],
) -> Setup:
    """The tiny checkpoint of ``spec`` built under ``root``, its copy for the original side (made readable
    there by ``for_original``), ``per_task`` prepared samples of every task, and the meta of the run."""
    paths = RunPaths(out=root / "out", reports=root / "reports")
    build_tiny(spec, paths.model_dir(spec.name))
    original = root / "original"
    shutil.copytree(paths.model_dir(spec.name), original)
    for_original(original)
    samples = listed_fixture(spec, paths, per_task, root / "samples.json")
    meta = Meta(
        repository=repository,
        commit=commit,
        checkpoint_sha256=checkpoint_sha256(paths.model_dir(spec.name)),
        settings={"samples_per_task": per_task, **settings},
    )
    return Setup(paths, samples, original, root / "samples.json", meta)


def original_outputs(folder: Path, samples: Sequence[PreparedSample]) -> list[Observed]:
    """What an original-code driver wrote in ``folder`` (``results.json``: task, sample_id, prompt,
    input_ids, new_ids, answer; ``pixels.pt``: ``task/sample_id`` -> pixel tensor), in ``samples``' order."""
    results = {(r["task"], r["sample_id"]): r for r in json.loads((folder / "results.json").read_text())}
    pixels = torch.load(folder / "pixels.pt")
    observed = []
    for sample in samples:
        row = results[(sample.task, sample.sample_id)]
        observed.append(
            Observed(
                sample=sample,
                text=row["prompt"],
                input_ids=row["input_ids"],
                vision={"pixel_values": pixels[f"{sample.task}/{sample.sample_id}"]},
                new_ids=row["new_ids"],
                answer=row["answer"],
            )
        )
    return observed


def as_recorded(answer: str) -> str:
    return answer


def sha256_tensor(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.detach().cpu().contiguous().numpy().tobytes()).hexdigest()


def fingerprint(tensor: torch.Tensor) -> TensorPrint:
    return TensorPrint(
        shape=tuple(tensor.shape),
        dtype=str(tensor.dtype).removeprefix("torch."),
        sha256=sha256_tensor(tensor),
        items=tuple(sha256_tensor(item) for item in tensor) if tensor.dim() > 1 else (),
    )


def golden_sample(observed: Observed) -> GoldenSample:
    return GoldenSample(
        inputs=SampleInputs(
            prompt_sha256=observed.sample.prompt_sha256, image_sha256=observed.sample.image_sha256
        ),
        text=observed.text,
        input_ids=tuple(observed.input_ids),
        vision={name: fingerprint(tensor) for name, tensor in observed.vision.items()},
        new_ids=tuple(observed.new_ids),
        answer=observed.answer,
    )


def environment(python: Path | str) -> dict[str, str]:
    """Python and the versions of PACKAGES in the environment of the interpreter ``python``."""
    probe = (
        "import importlib.metadata as m, json, platform, sys\n"
        "def v(p):\n"
        "    try:\n"
        "        return m.version(p)\n"
        "    except m.PackageNotFoundError:\n"
        "        return 'absent'\n"
        "print(json.dumps({'python': platform.python_version(), **{p: v(p) for p in sys.argv[1:]}}))"
    )
    done = subprocess.run([str(python), "-c", probe, *PACKAGES], capture_output=True, text=True, check=True)
    versions: dict[str, str] = json.loads(done.stdout)
    return versions


def checkpoint_sha256(folder: Path) -> str:
    """Hash of what a checkpoint folder holds that a model reads: every safetensors tensor (name, dtype,
    shape, bytes), every JSON file without its ``transformers_version`` stamps, every other file's bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode())
        if path.suffix == ".safetensors":
            with safe_open(path, framework="pt") as tensors:
                for name in sorted(tensors.keys()):
                    tensor = tensors.get_tensor(name)
                    digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}".encode())
                    digest.update(sha256_tensor(tensor).encode())
        elif path.suffix == ".json":
            digest.update(canonical_json(unstamped(json.loads(path.read_text("utf-8")))).encode())
        else:
            digest.update(path.read_bytes())
    return digest.hexdigest()


def unstamped(value: Any) -> Any:
    """``value`` without ``transformers_version`` keys, which name the writer, not the checkpoint."""
    if isinstance(value, dict):
        return {k: unstamped(v) for k, v in value.items() if k != "transformers_version"}
    if isinstance(value, list):
        return [unstamped(v) for v in value]
    return value


def pinned_commit(variable: str) -> str:
    """The commit ``.ci/original-code.sh`` unpacks for ``variable`` (e.g. ``YI``): the one the kit follows."""
    match = re.search(rf"^{variable}=([0-9a-f]{{40}})\b", PINS.read_text("utf-8"), re.M)
    if match is None:
        raise LookupError(f"{PINS}: no {variable}=<40 hex digits> line")
    return match.group(1)


def recording() -> bool:
    return os.environ.get(RECORD_VAR) == "1"


def require_original(present: bool, missing: str) -> None:
    """Skip the live comparison, saying ``missing``, where the original code or its environment is
    absent; fail instead when a recording was asked for, which only the live run can make."""
    if present:
        return
    if recording():
        pytest.fail(f"{RECORD_VAR}=1, but the live comparison cannot run: {missing}")
    pytest.skip(missing)


def path_of(family: str) -> Path:
    return GOLDEN_DIR / f"{family}.json"


def golden_of(family: str, samples: Mapping[str, Observed], meta: Meta, original_python: Path) -> Golden:
    """The fixture of the original side's ``samples``; the environments are read from the interpreters."""
    return Golden(
        family=family,
        meta=meta,
        original_environment=environment(original_python),
        kit_environment=environment(sys.executable),
        samples={key: golden_sample(observed) for key, observed in samples.items()},
    )


def record(family: str, samples: Mapping[str, Observed], meta: Meta, original_python: Path) -> Golden:
    """Write the fixture of the original side's ``samples`` (run by ``original_python``) and return it."""
    golden = golden_of(family, samples, meta, original_python)
    path = path_of(family)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(golden.model_dump(mode="json"), indent=1)
    # One line per id list or hash list, so a fixture's diff shows which sample changed. Only the layout's
    # line breaks are joined: a JSON string holds none.
    text = re.sub(r"\[\n\s*([^\[\]{}]*?)\n\s*\]", lambda m: "[" + re.sub(r",\n\s*", ", ", m[1]) + "]", text)
    path.write_text(text + "\n", encoding="utf-8")
    return golden


def load(family: str) -> Golden:
    path = path_of(family)
    how = f"record it by running the live parity test with the original code present and {RECORD_VAR}=1"
    if not path.is_file():
        raise FileNotFoundError(f"no golden parity fixture {path}: {how}")
    try:
        return Golden.model_validate_json(path.read_text("utf-8"))
    except ValidationError as err:
        raise ValueError(f"{path}: not a golden parity fixture ({err}); {how}") from err


def first_difference(want: Sequence[Any], got: Sequence[Any]) -> str:
    """Where two sequences (ids, characters) first differ, with what each side has there."""
    at = next(
        (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), min(len(want), len(got))
    )
    if isinstance(want, str) and isinstance(got, str):
        return (
            f"first difference at character {at}: expected {want[at : at + 40]!r}, got {got[at : at + 40]!r}"
        )
    if at == min(len(want), len(got)):
        return f"lengths {len(want)} and {len(got)}, equal up to position {at}"
    return (
        f"first difference at position {at} (lengths {len(want)} and {len(got)}): expected "
        f"{list(want[at : at + 8])}, got {list(got[at : at + 8])}"
    )


def tensor_difference(want: TensorPrint, got: TensorPrint) -> str | None:
    if (want.shape, want.dtype) != (got.shape, got.dtype):
        return f"expected {want.dtype} {list(want.shape)}, got {got.dtype} {list(got.shape)}"
    if want.sha256 == got.sha256:
        return None
    items = [i for i, (a, b) in enumerate(zip(want.items, got.items, strict=True)) if a != b]
    listed = ", ".join(map(str, items[:SHOWN])) + (", ..." if len(items) > SHOWN else "")
    where = f"; {len(items)} of {len(want.items)} slices differ ({listed})" if items else ""
    return f"same shape and dtype, other bytes (sha256 {want.sha256[:12]}, got {got.sha256[:12]}){where}"


def sample_differences(
    key: str, want: GoldenSample, got: GoldenSample, answer_form: Callable[[str], str]
) -> list[str]:
    found = []
    if want.inputs != got.inputs:
        found.append(f"{key}: the prepared sample (prompt or pictures) is not the one the fixture was given")
    for field in ("text", "input_ids", "new_ids"):
        a, b = getattr(want, field), getattr(got, field)
        if a != b:
            found.append(f"{key}: {field}: {first_difference(a, b)}")
    for name in sorted(want.vision.keys() | got.vision.keys()):
        if name not in want.vision or name not in got.vision:
            found.append(f"{key}: vision tensor {name} only on one side")
        elif problem := tensor_difference(want.vision[name], got.vision[name]):
            found.append(f"{key}: vision tensor {name}: {problem}")
    if answer_form(want.answer) != got.answer:
        found.append(f"{key}: answer: {first_difference(answer_form(want.answer), got.answer)}")
    return found


def differences(
    want: Golden, samples: Mapping[str, Observed], meta: Meta, answer_form: Callable[[str], str] = as_recorded
) -> list[str]:
    """What the kit's ``samples`` and ``meta`` differ in from ``want``, one line per sample and field."""
    found = [
        f"meta: {field}: expected {a!r}, got {b!r}"
        for field, a, b in ((f, getattr(want.meta, f), getattr(meta, f)) for f in Meta.model_fields)
        if a != b
    ]
    missing, extra = (
        sorted(want.samples.keys() - samples.keys()),
        sorted(samples.keys() - want.samples.keys()),
    )
    if missing or extra:
        found.append(f"samples: missing {missing[:SHOWN]}, not in the fixture {extra[:SHOWN]}")
    for key in sorted(want.samples.keys() & samples.keys()):
        found += sample_differences(key, want.samples[key], golden_sample(samples[key]), answer_form)
    return found


def assert_same(
    want: Golden,
    samples: Mapping[str, Observed],
    meta: Meta,
    answer_form: Callable[[str], str] = as_recorded,
    source: str = "the original code",
) -> None:
    """Fail, listing the differences, unless the kit's ``samples`` are ``want``'s, field for field."""
    found = differences(want, samples, meta, answer_form)
    if found:
        shown = "\n  ".join(found[:SHOWN])
        more = f"\n  ... and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
        here = environment(sys.executable)
        raise AssertionError(
            f"{want.family}: the kit differs from {source} in {len(found)} places:\n  {shown}{more}\n"
            f"recorded with the original in {want.original_environment} and the kit in "
            f"{want.kit_environment}; the kit here runs in {here}"
        )


def compare_live(
    family: str,
    original: Mapping[str, Observed],
    kit: Mapping[str, Observed],
    meta: Meta,
    original_python: Path,
    answer_form: Callable[[str], str] = as_recorded,
) -> None:
    """The kit against a live run of the original code; with ``MILEBENCH_RECORD_PARITY=1`` the original's
    outputs are first written as the family's fixture."""
    golden = (record if recording() else golden_of)(family, original, meta, original_python)
    assert_same(golden, kit, meta, answer_form)


def assert_matches(
    family: str, samples: Mapping[str, Observed], meta: Meta, answer_form: Callable[[str], str] = as_recorded
) -> None:
    """The kit's ``samples`` against the family's golden fixture (``answer_form`` maps a recorded answer
    to the kit's form)."""
    assert_same(load(family), samples, meta, answer_form, source=f"the golden fixture {path_of(family)}")
