"""Deployments in the DAG: dry runs under `--config deployment=docker` and apptainer show the right
jobs, inputs, commands and images; the Docker runtime hands the job its provenance facts."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

import docker
import pytest
from docker_runs import BOXED_RUN, HOST_CA, LOCAL_BASE, BoxedRun, snakemake_in, write_run
from test_declared_files import report_tables

from milebench import cli
from milebench.benchmarks.milebench.containers import provenance_env, stage_container
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.preprocess.regime import model_regime
from milebench.benchmarks.milebench.provenance import read_provenance
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode
from milebench.containers import image
from milebench.containers.docker_runtime import MODELS_MOUNT, ContainerSpec, caller_user, job_spec
from milebench.io import read_jsonl
from milebench.provenance import COMMIT_VAR, DIRTY_VAR, IMAGE_ID_VAR, provenance_path
from milebench.spec.base import SpecError
from milebench.spec.deployment import Deployment, DockerJobs
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.workflow_config import workflow_config

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
REGISTRY = "docker://ghcr.io/example/milebench"
GPU_CELL = "predictions/llava-1.5-7b/multi-image/ActionSequence.jsonl"
CPU_CELL = "predictions/random/multi-image/ActionSequence.jsonl"


def dry_run(
    root: Path, run: str, *args: str, env: dict[str, str] | None = None, placement: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    targets = [f"results/{run}/{GPU_CELL}", f"results/{run}/{CPU_CELL}"]
    config = ["--config", f"run={run}", f"specs={root / 'specs'}", *placement]
    return subprocess.run(
        [*SNAKEMAKE, "-n", "-p", "--cores", "1", *config, *args, "--", *targets],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
    )


def shell_commands(output: str) -> list[str]:
    prefix = "Shell command: "
    return [line.removeprefix(prefix) for line in output.splitlines() if line.startswith(prefix)]


def test_docker_runtime_builds_images_and_runs_infer_in_them(tmp_path: Path) -> None:
    write_run(tmp_path, "dock")
    result = dry_run(tmp_path, "dock", placement=("deployment=docker",))
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    commands = shell_commands(out)
    infer = [c for c in commands if " infer " in c or "container-infer" in c]
    assert len(infer) == 2
    assert all("container-infer --runtime docker" in c for c in infer)
    gpu = next(c for c in infer if "--model llava-1.5-7b" in c)
    cpu = next(c for c in infer if "--model random" in c)
    assert "--gpus all" in gpu and "--gpus" not in cpu
    builds = sorted(re.findall(r"image build --family (\S+)", out))
    assert builds == ["kit", "llava15"]
    # the infer jobs take the image records as input, so a new image re-runs inference
    assert re.search(r"input: \S+ActionSequence.jsonl, .*results/images/llava15.json", out)
    assert re.search(r"input: \S+ActionSequence.jsonl, .*results/images/kit.json", out)
    # preprocessing and scoring stay on the host
    assert all(" preprocess " not in c or "container" not in c for c in commands)


def test_apptainer_runtime_pulls_each_familys_image(tmp_path: Path) -> None:
    write_run(tmp_path, "appt")
    apptainer = ("deployment=apptainer", f"image_registry={REGISTRY}")
    refused = dry_run(tmp_path, "appt", placement=apptainer)
    assert refused.returncode != 0
    message = refused.stdout + refused.stderr
    assert "--software-deployment-method apptainer" in message and "deployment=apptainer" in message

    stub = tmp_path / "bin" / "apptainer"  # Snakemake checks the binary's version even in a dry run
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\necho "apptainer version 1.3.4"\n')
    stub.chmod(0o755)
    env = {"PATH": f"{stub.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    result = dry_run(
        tmp_path, "appt", "--software-deployment-method", "apptainer", env=env, placement=apptainer
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    pulled = set(re.findall(r"Singularity image (\S+) will be pulled", out))
    assert pulled == {
        image.registry_uri(REGISTRY, "kit"),
        image.registry_uri(REGISTRY, "llava15"),
    }
    commands = shell_commands(out)
    assert commands and all(c.startswith("python -m milebench --specs ") for c in commands)
    assert not any("container-infer" in c for c in commands)


def test_registry_uri_is_tagged_by_content(tmp_path: Path) -> None:
    uri = image.registry_uri(REGISTRY, "kit")
    assert re.fullmatch(re.escape(REGISTRY) + r"/kit:[0-9a-f]{12}", uri)
    assert image.registry_uri(REGISTRY, "kit") == uri
    with pytest.raises(image.ImageError, match="nope"):
        image.registry_uri(REGISTRY, "nope")


def test_docker_job_receives_provenance_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMMIT_VAR, "a" * 40)
    monkeypatch.setenv(DIRTY_VAR, "1")
    env = provenance_env("sha256:" + "b" * 64)
    assert env == {IMAGE_ID_VAR: "sha256:" + "b" * 64, COMMIT_VAR: "a" * 40, DIRTY_VAR: "1"}
    specs = load_specs()
    spec = job_spec(
        image="img",
        model=specs.models["random"],
        command=("infer",),
        specs_root=specs.root,
        writable=(),
        model_cache=None,
        workdir=Path.cwd(),
        env=env,
    )
    assert spec.env[IMAGE_ID_VAR] == "sha256:" + "b" * 64
    assert spec.env["HF_HUB_OFFLINE"] == "1"  # the fixed settings stay


@pytest.mark.docker
def test_docker_runtime_through_snakemake_matches_the_host(tmp_path: Path) -> None:
    """One infer job per runtime through the DAG: same answers; the docker one records its image, and
    a touched but identical image record re-runs nothing."""
    engine = subprocess.run(["docker", "image", "inspect", LOCAL_BASE], capture_output=True, check=False)
    if shutil.which("docker") is None or engine.returncode != 0:
        pytest.skip(f"docker: no engine or no base image {LOCAL_BASE} (run .ci/docker-setup.sh)")
    shutil.copytree(DEFAULT_SPECS, tmp_path / "specs")  # a real folder: the container mounts only it
    write_run(tmp_path, "host", models=["random"])
    write_run(tmp_path, "box", models=["random"])
    build = [f"image_base={LOCAL_BASE}"] + ([f"image_ca_bundle={HOST_CA}"] if HOST_CA.is_file() else [])

    def run(name: str, *args: str) -> str:
        placement = ["deployment=docker"] if name == "box" else []
        config = ["--config", f"run={name}", f"specs={tmp_path / 'specs'}", *build, *placement]
        done = subprocess.run(
            [*SNAKEMAKE, "--cores", "2", *config, *args, "--", f"results/{name}/{CPU_CELL}"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout + done.stderr

    run("host")
    run("box")

    def answers(name: str) -> list[tuple[int, str | None, str]]:
        rows = read_jsonl(tmp_path / "results" / name / CPU_CELL)
        return [(r["sample_id"], r["response"], r["cache_key"]) for r in rows]

    assert answers("box") == answers("host") and answers("host")
    record = json.loads((tmp_path / "results/images/kit.json").read_text())
    box = read_provenance(provenance_path(tmp_path / "results/box" / CPU_CELL))
    host = read_provenance(provenance_path(tmp_path / "results/host" / CPU_CELL))
    assert box.environment.image_id == record["image_id"] and host.environment.image_id is None
    assert box.kit.commit == host.kit.commit

    (tmp_path / "results/images/kit.json").touch()
    assert "Nothing to be done" in run("box", "-n")


def jobs_of(output: str) -> list[tuple[str, str, str]]:
    """(rule, input line, shell command) of every job a dry run with -p prints."""
    blocks = re.split(r"^(?:local)?rule ", output, flags=re.M)[1:]
    found = []
    for block in blocks:
        rule = block.split(":", 1)[0]
        inputs = re.search(r"^\s+input: (.*)$", block, re.M)
        command = re.search(r"^Shell command: (.*)$", block, re.M)
        found.append((rule, inputs.group(1) if inputs else "", command.group(1) if command else ""))
    return found


STAGES = {"fixture", "fetch", "preprocess", "score", "aggregate", "report"}
HUB_DATA = {"kind": "hub", "lock": "locks/milebench-hub.lock.yaml"}


def test_docker_jobs_all_runs_every_job_in_an_image(tmp_path: Path) -> None:
    """docker_jobs=all: each stage's command runs in the kit image, a tiny model's weights in its family's
    (torch), each with that image's record as an input; inference runs in the model family's image as
    before; images are built on the host."""
    write_run(tmp_path, "every", models=["random", "tiny-llava"])
    config = ["--config", "run=every", f"specs={tmp_path / 'specs'}", "deployment=docker", "docker_jobs=all"]
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "-p", "--cores", "1", *config], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    jobs = jobs_of(result.stdout)
    assert {rule for rule, _, _ in jobs} >= STAGES | {
        "tiny_model",
        "infer",
        "infer_model_multi_image",
        "build_image",
    }
    for rule, inputs, command in jobs:
        if rule in STAGES:
            assert " --in-image kit " in command, (rule, command)
            assert "results/images/kit.json" in inputs, (rule, inputs)
        elif rule == "tiny_model":
            assert " --in-image hf-current tiny-model " in command, command
            assert "results/images/hf-current.json" in inputs, inputs
        elif rule in ("infer", "infer_model_multi_image"):
            assert "container-infer --runtime docker" in command and "--in-image" not in command
        elif rule == "build_image":
            assert "--in-image" not in command
    write_run(tmp_path, "some", models=["random", "tiny-llava"])
    config = ["--config", "run=some", f"specs={tmp_path / 'specs'}", "deployment=docker"]
    plain = subprocess.run(
        [*SNAKEMAKE, "-n", "-p", "--cores", "1", *config],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert plain.returncode == 0 and "--in-image" not in plain.stdout


def write_vllm_run(root: Path) -> None:
    """Run ``onvllm``: Random and tiny LLaVA's vllm variant (planned under deployment docker)."""
    write_run(root, "onvllm", models=["random", "tiny-llava"], execution={"tiny-llava": "vllm"})


def test_a_vllm_variant_infers_in_the_vllm_image(tmp_path: Path) -> None:
    """The run selects tiny LLaVA's vllm variant: its infer job runs in the vllm family's image (the
    model's own, hf-current, has no vllm) and takes that image's record as input; the paper run's does not."""
    write_vllm_run(tmp_path)
    write_run(tmp_path, "own", models=["random", "tiny-llava"])

    def infer_jobs(run: str) -> list[tuple[str, str, str]]:
        config = ["--config", f"run={run}", f"specs={tmp_path / 'specs'}", "deployment=docker"]
        done = subprocess.run(
            [*SNAKEMAKE, "-n", "-p", "--cores", "1", *config], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        jobs = [job for job in jobs_of(done.stdout) if job[0].startswith("infer")]
        return [job for job in jobs if "--model tiny-llava" in job[2]]

    variant, own = infer_jobs("onvllm"), infer_jobs("own")
    assert variant and own
    for _, inputs, command in variant:
        assert "results/images/vllm.json" in inputs and "results/images/hf-current.json" not in inputs
        assert "container-infer --runtime docker" in command
    assert all("results/images/hf-current.json" in inputs for _, inputs, _ in own)


def test_container_infer_looks_for_the_image_of_the_runs_variant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`milebench container-infer` of a cell whose run selects the vllm variant runs it in the vllm image
    (none is recorded here, so it stops naming that family), not in the model's own."""
    info = (
        subprocess.run(["docker", "info"], capture_output=True, check=False)
        if shutil.which("docker")
        else None
    )
    if info is None or info.returncode != 0:
        pytest.skip("docker: no engine answers `docker info` (run .ci/docker-setup.sh)")
    monkeypatch.chdir(tmp_path)
    write_vllm_run(tmp_path)
    specs = load_specs(tmp_path / "specs")
    run = specs.run("onvllm")
    regime = model_regime(specs, run, "tiny-llava", Mode.MULTI_IMAGE).id
    prepared = RunPaths.for_run(run).prepared("ActionSequence", Mode.MULTI_IMAGE, regime)
    prepared.parent.mkdir(parents=True)
    prepared.touch()
    cell = ["--model", "tiny-llava", "--task", "ActionSequence", "--mode", "multi-image"]
    with caplog.at_level(logging.ERROR):
        assert (
            cli.main(["--specs", str(tmp_path / "specs"), "container-infer", "--run", "onvllm", *cell]) == 1
        )
    assert "family 'vllm'" in caplog.text and "family 'hf-current'" not in caplog.text


def test_docker_jobs_all_needs_deployment_docker() -> None:
    with pytest.raises(
        SpecError, match=r"--config: .*docker_jobs=all runs jobs under deployment=docker, not local"
    ):
        workflow_config({"docker_jobs": "all"})
    assert workflow_config({"deployment": "docker", "docker_jobs": "all"}).docker_jobs is DockerJobs.ALL
    assert workflow_config({}).deployment is Deployment.LOCAL
    with pytest.raises(
        SpecError, match=r"--config: deployment: Input should be 'local', 'docker' or 'apptainer'"
    ):
        workflow_config({"deployment": "podman"})


def test_a_run_spec_that_says_where_its_jobs_run_is_refused_naming_where_it_moved(tmp_path: Path) -> None:
    """``runtime:`` and its kin moved to the workflow's config: planning such a run stops with the file,
    the field and the config key, never running on the host what the spec sent to Docker; the spec still
    loads (an archived bundle's run spec verifies as it was)."""
    write_run(tmp_path, "old", runtime="docker", docker_jobs="all")
    assert load_specs(tmp_path / "specs").run("old").runtime is Deployment.DOCKER
    refused = dry_run(tmp_path, "old")
    assert refused.returncode != 0
    lines = [line for line in (refused.stdout + refused.stderr).splitlines() if "old.yaml" in line]
    assert lines == [
        f"{tmp_path / 'specs/runs/old.yaml'}: runtime: moved out of the run spec: run with "
        "`--config deployment=docker` (or a profile's config:) and remove it here",
        f"{tmp_path / 'specs/runs/old.yaml'}: docker_jobs: moved out of the run spec: run with "
        "`--config docker_jobs=all` (or a profile's config:) and remove it here",
    ]


def test_a_stage_in_the_kit_image_sees_only_its_run_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The container of a stage: the specs folder read-only at its host path, with the kit's own spec
    folders it links to; the run's output folder read-write at its host path (its reports folder for the
    report only); the model cache read-only; no network (a fetch from the hub gets one, with the hub token
    by name only; one from a mirror folder gets that folder read-only and none)."""
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path, "box")
    specs = load_specs(tmp_path / "specs")
    linked = [DEFAULT_SPECS / part for part in ("tasks", "models", "locks", "paper.yaml")]

    def container(*argv: str) -> ContainerSpec:
        full = ["--specs", str(specs.root), *argv]
        args = cli.build_parser().parse_args(full)
        command = cli.subcommand_argv(full, args.verbose)
        assert command == [*(["-v"] if args.verbose else []), *argv[argv.index(args.command) :]]
        spec = stage_container(args, specs, command, "sha256:" + "c" * 64)
        assert spec.command == ("--specs", str(specs.root.absolute()), *command)
        return spec

    def mounts(spec: ContainerSpec) -> dict[str, tuple[Path, bool]]:
        found = {m.target: (m.source, m.read_only) for m in spec.mounts}
        assert found.pop(MODELS_MOUNT, (None, True))[1]
        assert found.pop(str(specs.root.absolute())) == (specs.root.resolve(), True)
        for target in linked:  # where the specs folder's links point resolves inside too
            assert found.pop(str(target)) == (target.resolve(), True)
        return found

    cell = ["--model", "random", "--task", "ActionSequence", "--mode", "multi-image"]
    score = container("-v", "--in-image", "kit", "score", "--run", "box", "--root", "st", *cell)
    assert mounts(score) == {
        str(tmp_path / "st/results/box"): ((tmp_path / "st/results/box").resolve(), False)
    }
    assert score.network_mode == "none" and score.passthrough == () and score.env["HF_HUB_OFFLINE"] == "1"
    assert score.env[IMAGE_ID_VAR] == "sha256:" + "c" * 64 and score.user == caller_user()
    report = container("--in-image", "kit", "report", "--run", "box", "--root", "st")
    assert {target: rw for target, (_, rw) in mounts(report).items()} == {
        str(tmp_path / "st/results/box"): False,
        str(tmp_path / "st/reports/box"): False,
    }

    write_run(tmp_path, "hub", data=HUB_DATA)
    (tmp_path / "mirror").mkdir()
    mirror = {"kind": "mirror", "url": "mirror", "lock": "locks/milebench-hub.lock.yaml"}
    write_run(tmp_path, "near", data=mirror)
    specs = load_specs(tmp_path / "specs")
    hub = container("--in-image", "kit", "fetch", "--run", "hub")
    assert hub.network_mode == "bridge" and {"HF_TOKEN", "HF_ENDPOINT", "HTTPS_PROXY"} <= set(hub.passthrough)
    assert "OPENAI_API_KEY" not in hub.passthrough
    near = container("--in-image", "kit", "fetch", "--run", "near")
    assert near.network_mode == "none" and near.passthrough == ()
    assert mounts(near)[str(tmp_path / "mirror")] == ((tmp_path / "mirror").resolve(), True)


def test_in_image_runs_stages_not_inference(tmp_path: Path) -> None:
    write_run(tmp_path, "box")
    argv = ["--specs", str(tmp_path / "specs"), "--in-image", "kit", "infer", "--run", "box"]
    argv += ["--model", "random", "--task", "ActionSequence", "--mode", "multi-image"]
    with pytest.raises(SystemExit, match="run infer with `milebench container-infer`"):
        cli.main(argv)


@pytest.mark.docker
def test_every_job_in_containers_gives_the_host_runs_report(boxed_run: BoxedRun, tmp_path: Path) -> None:
    """docker_jobs=all through the DAG, fixture to report, a tiny torch model included: every job runs in
    a container (the stages in the kit image, the tiny model's weights and inference in hf-current's), and
    the run's aggregate, verdict and report tables equal those of the same run on the host."""
    records = boxed_run.records
    write_run(tmp_path, BOXED_RUN, models=["random", "tiny-llava"])
    shutil.copytree(records, tmp_path / image.RECORDS_DIR)
    snakemake_in(boxed_run.checkout, tmp_path, BOXED_RUN)
    host, box = tmp_path, boxed_run.root
    for name in ("aggregate.json", "verdict.json"):
        assert (box / "results/box" / name).read_text() == (host / "results/box" / name).read_text(), name
    assert report_tables(box / "reports/box") == report_tables(host / "reports/box")

    ids = {f: json.loads((records / f"{f}.json").read_text())["image_id"] for f in ("kit", "hf-current")}
    logs = sorted((box / "results/box/logs").rglob("*.log"))
    rules = {log.parent.name for log in logs} - {"build_image"}  # images are built on the host
    assert rules == {"fixture", "fetch", "tiny_model", "preprocess", "infer", "score", "aggregate", "report"}
    for log in (log for log in logs if log.parent.name in rules):  # each job ran in its family's image
        torch = log.parent.name in ("tiny_model", "infer") and log.name.startswith("tiny-llava")
        family = "hf-current" if torch else "kit"
        assert f"container: image {ids[family]}; command milebench " in log.read_text(), log
    cell = "multi-image/ActionSequence"
    infer = read_provenance(provenance_path(box / f"results/box/predictions/tiny-llava/{cell}.jsonl"))
    score = read_provenance(provenance_path(box / f"results/box/scores/tiny-llava/{cell}.json"))
    assert (infer.environment.image_id, score.environment.image_id) == (ids["hf-current"], ids["kit"])
    left = docker.from_env().containers.list(all=True, filters={"label": "org.milebench.run=box"})
    assert left == []
