"""A real SLURM cluster (``.ci/slurm-setup.sh``): the reduced smoke run with every job but the local rules
submitted through ``profiles/slurm``, its FILL-IN values taken from the cluster as a user fills them in.
It gives the local run's aggregate, verdict and report tables, and sacct lists its jobs. The per-(model,
mode) infer jobs, cancelled mid-way with ``scancel`` or stopped at their time limit, resume on a rerun:
every sample answered exactly once. A job that declares a GPU asks SLURM for one."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from mini_specs import linked_specs
from test_declared_files import report_tables
from test_infer_kill import answers
from test_infer_load_once import journal_lines
from unavailable import unavailable

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
RUN = "slurm-smoke"
TINY = ["tiny-llava", "tiny-qwen2-vl"]
TASKS = ["GPR1200"]
"""One task (each SLURM job costs a Snakemake start): GPR1200, answered one sample per batch, so a job
paused at its first answer is mid-task."""
SAMPLES = 6
"""Enough that a job paused at its first answer is still mid-task: the pause takes a scancel call, and a
tiny model answers a sample in a fraction of a second."""
SPEC = {
    "name": RUN,
    "description": "the smoke run, reduced: both tiny models and the Random baseline on one task",
    "models": ["random", *TINY],
    "tasks": TASKS,
    "modes": ["multi-image"],
    "data": {"kind": "fixture", "seed": 0, "samples_per_task": SAMPLES},
}
MODE = Mode.MULTI_IMAGE
MODEL_JOB = "infer_model_multi_image"
"""The rule of the per-(model, mode) infer job of the models that load weights."""
LOCAL_RULES = {"all", "fixture", "fetch", "aggregate", "report"}
STATUS_POLL = ["--slurm-init-seconds-before-status-checks", "2"]
"""The plugin's first status check after 2 s, not 40: the jobs here take seconds."""
DEADLINE_S = 1200.0
"""Upper bound on one Snakemake run: a guard against hanging, not a timing assertion."""
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: .*/slurm_logs/rule_(\w+)/")
SUMMARY = re.compile(
    r"predictions/[^/]+/[^/]+/([\w-]+)\.jsonl: InferSummary\(total=(\d+), reused=(\d+), generated=(\d+)"
)


def test_setup_script_reports_a_cluster_that_cannot_start_and_exits_zero(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("slurmctld", "slurmd", "slurmdbd", "sbatch", "munged", "mariadbd", "apt-get"):
        (fake / tool).write_text("#!/bin/sh\nexit 1\n")
        (fake / tool).chmod(0o755)
    env = os.environ | {
        "PATH": f"{fake}:{os.environ['PATH']}",
        "WAIT_S": "1",
        "SLURM_CONF_DIR": str(tmp_path / "etc"),
        "SLURM_LOG_DIR": str(tmp_path / "log"),
    }
    done = subprocess.run(
        ["bash", str(REPO / ".ci" / "slurm-setup.sh")], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^slurm: unavailable \(.+\)$", done.stdout, re.M), done.stdout
    assert not (tmp_path / "etc").exists(), "nothing is configured for a cluster that cannot start"


@pytest.mark.parametrize(
    ("tools", "reason"),
    [
        ({}, "slurm: no sinfo on this machine"),
        ({"sinfo": "exit 1", "sacct": "exit 0", "sbatch": "exit 0"}, "slurm: `sinfo -h -o %T` fails"),
        ({"sinfo": "echo down", "sacct": "exit 0", "sbatch": "exit 0"}, "slurm: no node is up"),
    ],
    ids=["no-tools", "sinfo-fails", "node-down"],
)
@pytest.mark.parametrize("ci", ["", "1"], ids=["local", "ci"])
def test_a_missing_cluster_skips_here_and_fails_in_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tools: dict[str, str], reason: str, ci: str
) -> None:
    for tool, body in tools.items():
        (tmp_path / tool).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", ci)
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception)) as raised:
        slurm_or_skip()
    assert raised.type is (pytest.fail.Exception if ci else pytest.skip.Exception), raised.value
    assert str(raised.value).startswith(reason), raised.value


def slurm_or_skip() -> None:
    """Skips when this machine has no working cluster; fails instead in CI (``unavailable``)."""
    for tool in ("sinfo", "sacct", "sbatch"):
        if shutil.which(tool) is None:
            unavailable(f"slurm: no {tool} on this machine (run .ci/slurm-setup.sh)")
    for probe in (["sinfo", "-h", "-o", "%T"], ["sacct", "-n", "-X", "-S", "now"]):
        done = subprocess.run(probe, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            unavailable(f"slurm: `{' '.join(probe)}` fails (run .ci/slurm-setup.sh): {done.stderr[-200:]}")
    if not re.search(
        r"^(idle|mixed|allocated)", subprocess.check_output(["sinfo", "-h", "-o", "%T"], text=True), re.M
    ):
        unavailable("slurm: no node is up (run .ci/slurm-setup.sh)")


def out(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def filled_profile(dest: Path) -> Path:
    """profiles/slurm with its FILL-IN values as a user of this cluster writes them: their account, the
    default partition for CPU jobs and a partition whose nodes have GPUs for the infer jobs."""
    user = out("id", "-un").strip()
    accounts = out("sacctmgr", "-n", "-P", "list", "association", f"user={user}", "format=Account").split()
    partitions = [line.split("|") for line in out("sinfo", "-h", "-o", "%P|%G").split()]
    default = next(name.rstrip("*") for name, _ in partitions if name.endswith("*"))
    gpu = next(
        (name.rstrip("*") for name, gres in partitions if "gpu" in gres and name != f"{default}*"), default
    )
    assert accounts, f"slurm: user {user} is in no account"
    text = (REPO / "profiles" / "slurm" / "config.yaml").read_text()
    for placeholder, value in (
        ("FILL-IN-account", accounts[0]),
        ("FILL-IN-cpu-partition", default),
        ("FILL-IN-gpu-partition", gpu),
    ):
        assert placeholder in text, placeholder
        text = text.replace(placeholder, value)
    assert not re.search(r"FILL-IN-\w", text), "a FILL-IN value the test does not know"
    dest.mkdir(parents=True)
    (dest / "config.yaml").write_text(text)
    return dest


def config(root: Path) -> list[str]:
    return ["--config", f"run={RUN}", f"specs={root / 'specs'}"]


def write_run(root: Path) -> Path:
    specs = linked_specs(root / "specs")
    (specs / "runs" / f"{RUN}.yaml").write_text(yaml.safe_dump(SPEC))
    return root


def paths_of(root: Path) -> RunPaths:
    return RunPaths.for_run(load_specs(root / "specs").run(RUN), base=root)


@contextmanager
def snakemake(root: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """Snakemake in ``root``, its output in ``root/snakemake.log``; stopped if the test fails."""
    with (root / "snakemake.log").open("w") as log:
        child = subprocess.Popen(
            [*SNAKEMAKE, *args, *config(root)], cwd=root, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        try:
            yield child
        finally:
            if child.poll() is None:
                child.terminate()  # the executor cancels its submitted jobs
            child.wait(timeout=120)


def finish(child: subprocess.Popen[str], root: Path) -> tuple[int, str]:
    child.wait(timeout=DEADLINE_S)
    return child.returncode, (root / "snakemake.log").read_text()


@dataclass(frozen=True)
class Job:
    rule: str
    state: str
    partition: str
    tres: str
    comment: str


def submitted(output: str) -> dict[str, str]:
    """SLURM job id -> rule, of every job Snakemake submitted."""
    return {jobid: rule for jobid, rule in SUBMITTED.findall(output)}


def accounted(ids: dict[str, str]) -> dict[str, Job]:
    """What sacct has on record for the jobs ``ids`` (allocations only, not their steps)."""
    assert ids, "no job was submitted"
    fields = "JobID,State,Partition,ReqTRES,Comment"
    table = out("sacct", "-n", "-X", "-P", "-j", ",".join(ids), "-o", fields)
    jobs = {}
    for line in table.splitlines():
        jobid, state, partition, tres, comment = line.split("|")
        jobs[jobid] = Job(ids[jobid], state.split()[0], partition, tres, comment)
    return jobs


@dataclass(frozen=True)
class Runs:
    local: Path
    cluster: Path
    output: str
    """The cluster run's Snakemake output."""
    profile: Path

    def partition(self, rule: str) -> str:
        """The partition the filled-in profile gives a rule's jobs."""
        profile = yaml.safe_load((self.profile / "config.yaml").read_text())
        default: str = profile["default-resources"]["slurm_partition"]
        return profile["set-resources"].get(rule, {}).get("slurm_partition", default)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The reduced smoke run twice, side by side: on this host, and with every job on SLURM."""
    slurm_or_skip()
    local, cluster = (write_run(tmp_path_factory.mktemp(name)) for name in ("local", "cluster"))
    profile = filled_profile(tmp_path_factory.mktemp("profile") / "slurm")
    with (
        snakemake(local, "--cores", "2") as on_host,
        snakemake(cluster, "--profile", str(profile), *STATUS_POLL) as on_slurm,
    ):
        host_rc, host_output = finish(on_host, local)
        slurm_rc, slurm_output = finish(on_slurm, cluster)
    assert host_rc == 0, host_output[-3000:]
    assert slurm_rc == 0, slurm_output[-3000:]
    return Runs(local, cluster, slurm_output, profile)


@pytest.mark.slurm
def test_a_run_on_slurm_gives_the_local_runs_aggregate_verdict_and_report(runs: Runs) -> None:
    for name in ("aggregate.json", "verdict.json"):
        ours = (runs.cluster / "results" / RUN / name).read_bytes()
        assert ours == (runs.local / "results" / RUN / name).read_bytes(), name
    assert report_tables(runs.cluster / "reports" / RUN) == report_tables(runs.local / "reports" / RUN)


@pytest.mark.slurm
def test_sacct_lists_every_job_but_the_local_rules(runs: Runs) -> None:
    ids = submitted(runs.output)
    planned = re.findall(r"^(local)?rule (\w+):$", runs.output, re.M)
    assert {rule for local, rule in planned if local} <= LOCAL_RULES
    assert sorted(ids.values()) == sorted(rule for local, rule in planned if not local)
    jobs = accounted(ids)
    assert set(jobs) == set(ids)
    assert {job.rule for job in jobs.values()} == {"tiny_model", "preprocess", "infer", MODEL_JOB, "score"}
    for jobid, job in jobs.items():
        assert job.state == "COMPLETED", (jobid, job)
        assert job.comment.startswith(f"rule_{job.rule}"), (jobid, job)
        # No job of this run declares a GPU (the tiny models and the baseline run on CPUs).
        assert "gres/gpu" not in job.tres, (jobid, job)
        assert job.partition == runs.partition(job.rule), (jobid, job)


def gpu_profile(profile: Path, dest: Path) -> Path:
    """The filled-in profile whose per-(model, mode) infer jobs declare a GPU. In the profile, not with
    ``--set-resources`` on the command line: that replaces the profile's set-resources whole."""
    config = yaml.safe_load((profile / "config.yaml").read_text())
    config["set-resources"][MODEL_JOB]["gpu"] = 1
    dest.mkdir()
    (dest / "config.yaml").write_text(yaml.safe_dump(config))
    return dest


def model_jobs() -> dict[str, str]:
    """Model -> the SLURM job id of its per-(model, mode) infer job, of those queued or running."""
    jobs = {}
    for line in out("squeue", "-h", "-o", "%i|%k").split():
        jobid, comment = line.split("|")
        if comment.startswith(prefix := f"rule_{MODEL_JOB}_wildcards_"):
            jobs[comment.removeprefix(prefix)] = jobid
    return jobs


def infer_processes(specs: Path) -> dict[str, int]:
    """Model -> the pid of the ``milebench infer`` a job runs for it on ``specs`` (this node is the
    cluster's only one)."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            argv = [arg.decode() for arg in (entry / "cmdline").read_bytes().split(b"\0")]
        except (OSError, UnicodeDecodeError):
            continue
        if argv[1:4] == ["-m", "milebench", "--specs"] and argv[4:6] == [str(specs), "infer"]:
            found[argv[argv.index("--model") + 1]] = int(entry.name)
    return found


def pause_mid_task(paths: RunPaths, task: str, child: subprocess.Popen[str]) -> dict[str, str]:
    """Stop each tiny model's infer process (SIGSTOP) the moment it has answered the first sample of
    ``task``: model -> its SLURM job id. The job stays allocated, its clock running; a scancel would
    take too long to stop a model that answers several samples a second."""
    deadline = time.monotonic() + DEADLINE_S
    pids: dict[str, int] = {}
    while set(pids) < set(TINY) and child.poll() is None and time.monotonic() < deadline:
        pids = infer_processes((paths.root / "specs").resolve())
        time.sleep(0.2)
    paused: set[str] = set()
    while paused < set(TINY) and child.poll() is None and time.monotonic() < deadline:
        for model in set(TINY) - paused:
            if journal_lines(paths.journal(model, task, MODE)):
                os.kill(pids[model], signal.SIGSTOP)
                paused.add(model)
        time.sleep(0.005)
    assert paused == set(TINY), f"not every infer job answered in {task}: {paused}; {child.poll()=}"
    jobs = model_jobs()
    return {model: jobs[model] for model in TINY}


@pytest.mark.slurm
def test_cancelled_and_timed_out_infer_jobs_resume_answering_every_sample_once(
    runs: Runs, tmp_path: Path
) -> None:
    """One tiny model's infer job is cancelled (scancel), the other's is stopped by SLURM at its time limit,
    each mid-task; the rerun answers only what neither answered. Both declare a
    GPU (``gpu: 1`` in the profile, as a checkpoint's job does): SLURM is asked for it."""
    root = tmp_path / "faults"
    shutil.copytree(runs.cluster, root, symlinks=True)
    paths = paths_of(root)
    # The run as it stands before the tiny models' inference: no answers (journals included), and
    # nothing downstream of them.
    for model in TINY:
        for task in TASKS:
            for path in (paths.predictions, paths.infer_provenance, paths.journal):
                path(model, task, MODE).unlink()
        shutil.rmtree(paths.out / "scores" / model)
    for path in (paths.aggregate_json, paths.verdict_json):
        path.unlink()
    shutil.rmtree(paths.reports)
    profile = ["--profile", str(gpu_profile(runs.profile, tmp_path / "gpu")), *STATUS_POLL]
    cancelled, timed_out = TINY
    with snakemake(root, *profile) as first:
        jobs = pause_mid_task(paths, TASKS[0], first)
        out("scancel", jobs[cancelled])
        # Below the time it has run: SLURM stops it at its next time-limit check.
        out("scontrol", "update", f"JobId={jobs[timed_out]}", "TimeLimit=1")
        rc, output = finish(first, root)
    assert rc != 0, output[-3000:]
    states = accounted({jobid: MODEL_JOB for jobid in jobs.values()})
    assert states[jobs[cancelled]].state == "CANCELLED" and states[jobs[timed_out]].state == "TIMEOUT", states
    kept = {(m, t): journal_lines(paths.journal(m, t, MODE)) for m in TINY for t in TASKS}
    assert all(1 <= n < SAMPLES for n in kept.values()), kept

    with snakemake(root, *profile) as rerun:
        rc, output = finish(rerun, root)
    assert rc == 0, output[-3000:]
    for jobid, job in accounted(submitted(output)).items():
        assert job.state == "COMPLETED", (jobid, job)
        assert ("gres/gpu=1" in job.tres) is (job.rule == MODEL_JOB), (jobid, job)
        assert job.partition == runs.partition(job.rule), (jobid, job)
    for model in TINY:
        log = paths.logs("infer", f"{model}.{MODE}").read_text()
        summaries = {task: tuple(map(int, n)) for task, *n in SUMMARY.findall(log)}
        for task in TASKS:
            n = kept[(model, task)]
            assert summaries[task] == (SAMPLES, n, SAMPLES - n), (model, task, summaries)
            # Each sample once, answered as in the uninterrupted run.
            uninterrupted = paths_of(runs.cluster).predictions(model, task, MODE)
            assert answers(paths.predictions(model, task, MODE)) == answers(uninterrupted), (model, task)
    for name in ("aggregate.json", "verdict.json"):
        assert (paths.out / name).read_bytes() == (runs.cluster / "results" / RUN / name).read_bytes()
    for jobid, job in states.items():
        assert "gres/gpu=1" in job.tres and job.partition == runs.partition(MODEL_JOB), (jobid, job)
