"""Acceptance: an inference job killed with SIGKILL mid-way resumes and answers every sample exactly once,
identical to an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from milebench.infer.engine import run_model
from milebench.io import read_jsonl
from milebench.records import Prediction, PreparedSample
from milebench.spec.model import ModelSpec
from milebench.spec.run import Mode
from milebench.spec.task import QuestionType

N = 24
DEADLINE_S = 60.0
"""Upper bound on waiting for the child: a guard against hanging, not a timing assertion."""

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tests.test_infer_kill import BuildingEchoAdapter, SPEC, samples
    from milebench.infer.engine import run_model

    class SlowEcho(BuildingEchoAdapter):
        def answer(self, batch, inputs):
            time.sleep(0.05)
            return super().answer(batch, inputs)

    run_model(SlowEcho(), SPEC, samples(), Path(sys.argv[1]), input_workers=int(sys.argv[2]))
    """
)
PIDS = "MILEBENCH_TEST_ENCODER_PIDS"
"""Where the child's ``encode`` notes the process it runs in."""

SPEC = ModelSpec.model_validate(
    {
        "name": "echo",
        "display_name": "echo",
        "section": "baseline",
        "adapter": "oracle",
        "weights": {"kind": "builtin"},
        "batch": {"batch_image": 2},
    }
)


class EchoAdapter:
    version = "echo-1"

    def __init__(self) -> None:
        self.seen: list[int] = []

    def generate(self, batch: Sequence[PreparedSample]) -> list[str]:
        self.seen += [s.sample_id for s in batch]
        return [f"{s.task}:{s.sample_id}:{s.context}" for s in batch]


class BuildingEchoAdapter(EchoAdapter):
    """The echo with its inputs built apart, so the engine can build them in an input worker."""

    def encode(self, batch: Sequence[PreparedSample]) -> list[str]:
        if PIDS in os.environ:
            with open(os.environ[PIDS], "a") as fh:
                fh.write(f"{os.getpid()}\n")
        return [f"{s.task}:{s.sample_id}:{s.context}" for s in batch]

    def answer(self, batch: Sequence[PreparedSample], inputs: list[str]) -> list[str]:
        self.seen += [s.sample_id for s in batch]
        return inputs

    def generate(self, batch: Sequence[PreparedSample]) -> list[str]:
        return self.answer(batch, self.encode(batch))


def running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def samples() -> list[PreparedSample]:
    return [
        PreparedSample(
            task="WebQA",
            mode=Mode.MULTI_IMAGE,
            sample_id=i,
            instruction="Answer.",
            context=f"<ImageHere>question {i}",
            images=(f"WebQA/images/{i}.png",),
            image_sha256=(f"{i:064x}",),
            prompt_sha256=f"{i:064x}",
            question_type=QuestionType.OPEN_ENDED,
            choices=None,
            response="x",
            image_quantity_level="Few",
            n_images=1,
        )
        for i in range(N)
    ]


def answers(path: Path) -> list[tuple[int, str | None, str]]:
    return [(p.sample_id, p.response, p.cache_key) for p in map(Prediction.model_validate, read_jsonl(path))]


@pytest.mark.parametrize("input_workers", [0, 1])
def test_sigkill_then_resume_equals_uninterrupted(tmp_path: Path, input_workers: int) -> None:
    reference = tmp_path / "reference.jsonl"
    run_model(EchoAdapter(), SPEC, samples(), reference)

    out, pids = tmp_path / "killed.jsonl", tmp_path / "pids"
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo), PIDS: str(pids)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(out), str(input_workers)], cwd=repo, env=env)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and child.poll() is None:
            if out.exists() and len(out.read_bytes().splitlines()) >= 6:
                break
            time.sleep(0.02)
        assert child.poll() is None, "the child finished before it could be killed"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=DEADLINE_S)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    kept = [sample_id for sample_id, _, _ in answers(out)]
    assert 6 <= len(kept) < N
    builders = {int(pid) for pid in pids.read_text().split()}
    assert (builders == {child.pid}) is (input_workers == 0)
    deadline = time.monotonic() + DEADLINE_S
    while any(map(running, builders)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(running, builders)), "an input worker outlived its killed job"

    resumed = BuildingEchoAdapter()
    summary = run_model(resumed, SPEC, samples(), out, input_workers=input_workers)
    assert sorted(resumed.seen) == sorted(set(range(N)) - set(kept))
    assert summary.reused == len(kept) and summary.generated == N - len(kept)
    assert answers(out) == answers(reference)
