"""Acceptance: an inference job killed with SIGKILL mid-way resumes and answers every sample exactly once,
identical to an uninterrupted run; it leaves no process behind, and while it runs no second job can
answer its cell."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from milebench.benchmarks.milebench.records import PreparedSample
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.benchmarks.milebench.spec.task import QuestionType
from milebench.infer.engine import run_model
from milebench.infer.journal import CellBusy
from milebench.infer.records import Prediction
from milebench.io import read_jsonl
from milebench.spec.model import ModelSpec

N = 24
DEADLINE_S = 60.0
"""Upper bound on waiting for the child: a guard against hanging, not a timing assertion."""
SURVIVOR_S = 10.0
"""How long a killed job's processes may take to go (they go at once; a stuck worker never does)."""

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tests.test_infer_kill import BuildingEchoAdapter, SPEC, samples
    from milebench.infer.engine import run_model

    class SlowEcho(BuildingEchoAdapter):
        def answer(self, batch, inputs):
            time.sleep(float(sys.argv[3]))
            return super().answer(batch, inputs)

    run_model(SlowEcho(), SPEC, samples(), Path(sys.argv[1]), input_workers=int(sys.argv[2]))
    """
)
REAL_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from milebench.infer.engine import run_model
    from milebench.infer.registry import load_adapter
    from milebench.benchmarks.milebench.paths import RunPaths
    from milebench.spec.model import ModelSpec
    from tests.picture_samples import picture_sample

    spec, root = ModelSpec.model_validate_json(sys.argv[1]), Path(sys.argv[2])
    paths = RunPaths(out=root, reports=root / "reports")
    samples = [picture_sample(i, 3) for i in range(int(sys.argv[3]))]
    adapter = load_adapter(spec, paths, paths.data_root)
    run_model(adapter, spec, samples, root / "pred.jsonl", input_workers=1)
    """
)
"""A real model answering with an input worker, as ``milebench infer --threads 2`` does."""
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


def session(sid: int) -> list[int]:
    """The live processes of session ``sid`` (a job started in its own session, and all it forked)."""
    members = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(entry.name))
    return members


def start_job(args: Sequence[str], out: Path, lines: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A job in its own session, once ``out`` holds ``lines`` answers (killed if it never does)."""
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(repo), str(repo / "tests"))), **env}
    child = subprocess.Popen([sys.executable, "-c", *args], cwd=repo, env=env, start_new_session=True)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and child.poll() is None:
        if out.exists() and len(out.read_bytes().splitlines()) >= lines:
            return child
        time.sleep(0.02)
    os.killpg(child.pid, signal.SIGKILL)
    raise AssertionError(f"the job ended (exit {child.poll()}) or stalled before {lines} answers")


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
    child = start_job([CHILD, str(out), str(input_workers), "0.05"], out, 6, {PIDS: str(pids)})
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=DEADLINE_S)
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


def test_a_second_job_on_a_busy_cell_stops_at_once_and_a_killed_job_never_blocks(tmp_path: Path) -> None:
    out = tmp_path / "busy.jsonl"
    child = start_job([CHILD, str(out), "0", "0.5"], out, 2, {})
    try:
        second = BuildingEchoAdapter()
        with pytest.raises(
            CellBusy, match=f"^echo WebQA multi-image: another job .*{re.escape(str(out))}.lock"
        ):
            run_model(second, SPEC, samples(), out)
        assert second.seen == [] and child.poll() is None
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=DEADLINE_S)
    kept = {sample_id for sample_id, _, _ in answers(out)}
    summary = run_model(second, SPEC, samples(), out)
    assert summary.reused == len(kept) and sorted(second.seen) == sorted(set(range(N)) - kept)


def test_sigkill_of_a_real_model_with_an_input_worker_leaves_no_process(tmp_path: Path) -> None:
    """The worker may be caught handing over a batch bigger than a pipe's buffer (eight samples of
    three pictures): it must still die with the job, not wait for it forever."""
    from tiny_checks import tiny_run, tiny_spec  # here: the echo jobs import this module, and stay light

    spec = tiny_spec("tiny-llava", "hf-llava", "llava", 16)
    tiny_run(tmp_path, spec, [(40, 30), (32, 32), (20, 50)])
    out = tmp_path / "pred.jsonl"
    child = start_job([REAL_CHILD, spec.model_dump_json(), str(tmp_path), "320"], out, 16, {})
    try:
        assert len(session(child.pid)) >= 2, "the job should have started its input worker"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=DEADLINE_S)
        deadline = time.monotonic() + SURVIVOR_S
        while session(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert session(child.pid) == [], "a process of the killed job is still running"
    finally:
        if session(child.pid):
            os.killpg(child.pid, signal.SIGKILL)
    assert 16 <= len(answers(out)) < 320
