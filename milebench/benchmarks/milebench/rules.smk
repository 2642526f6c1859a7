"""MileBench rules: fixture/fetch -> preprocess -> infer -> score -> report (+ aggregate, audit, archive).

Included by the top Snakefile for a run spec of benchmark milebench (milebench.benchmarks.milebench declares
this file), which lists the targets and config keys. ``CONFIG`` (the checked --config), ``BENCHMARK_RUN``,
``SPECS_DIR``, ``MB``, ``KIT_FAMILY`` and the helpers of rules/common.smk come from there; this file makes
``BENCHMARK_TARGETS`` its default target.

The specs are parsed once, here. Each job's params carry the content hash of exactly the specs it
depends on, so editing a spec re-runs exactly the jobs it affects (Snakemake's params trigger), and
outputs of unchanged jobs keep their checksums, so nothing downstream of them re-runs either.
"""

from pathlib import Path

from milebench.benchmarks.milebench.audit.plan import audit_jobs
from milebench.benchmarks.milebench.paper import load_paper
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import cells, job_per_cell, mode_tasks, model_regimes, prepare_jobs, regimes
from milebench.benchmarks.milebench.preprocess.regime import tokenizer_dirs
from milebench.benchmarks.milebench.run_console import RunConsole
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode, has_verdict
from milebench.containers.image import RECORDS_DIR, content_key, family
from milebench.infer.api.prerequisites import missing_prerequisites
from milebench.job_resources import infer_resources
from milebench.spec.base import spec_hash
from milebench.spec.deployment import Deployment, DockerJobs
from milebench.spec.model import TinyWeights
from milebench.spec.workflow_config import moved_settings
from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod


SPECS = load_specs(SPECS_DIR)
PAPER = load_paper(SPECS)
RUN = SPECS.run(BENCHMARK_RUN)
P = RunPaths.for_run(RUN)
CELLS = cells(SPECS, RUN)
PREPARE_JOBS = prepare_jobs(SPECS, RUN)
MODELS = {m.name: m for m in SPECS.run_models(RUN)}
TINY = [name for name, m in MODELS.items() if isinstance(m.weights, TinyWeights)]
REGIMES = regimes(SPECS, RUN)
MODEL_REGIME = model_regimes(SPECS, RUN)
RESOURCES = {name: infer_resources(m) for name, m in MODELS.items()}
MODE_TASKS = {mode: tasks for mode, tasks in mode_tasks(SPECS, RUN).items() if tasks}
# The models with one infer job per model and mode (weights loaded once, an API's pre-flight once), and
# the built-in baselines (one per cell); a wildcard pattern each. With none, a pattern that matches
# nothing: Snakemake takes an empty one as none.
NO_MODEL = "(?!)"
PER_MODE = [name for name, m in MODELS.items() if not job_per_cell(m)]
PER_MODE_MODELS = "|".join(PER_MODE) or NO_MODEL
PER_CELL_MODELS = "|".join(name for name, m in MODELS.items() if job_per_cell(m)) or NO_MODEL
# The audits the run spec declares (`audit:`): one job each, their tables in the report. A batch audit
# of another variant than the run's may run in another image.
AUDITS = audit_jobs(SPECS, RUN)
AUDITED = [job.model for job in AUDITS.batch]
FAMILIES = sorted({KIT_FAMILY} | {m.container for m in [*MODELS.values(), *AUDITED] if m.container})


# Where jobs run is the workflow's config (`--config deployment=...`), never the run spec's.
MOVED = moved_settings(RUN, SPECS_DIR / "runs" / f"{RUN.name}.yaml")
if MOVED is not None:
    sys.exit(str(MOVED))
if CONFIG.deployment is Deployment.APPTAINER:
    if DeploymentMethod.APPTAINER not in workflow.deployment_settings.deployment_method:
        sys.exit(
            "--config: deployment=apptainer: run Snakemake with --software-deployment-method apptainer "
            "(or use deployment local or docker)"
        )
    MB = Untracked(f"python -m milebench --specs {SPECS_DIR}{LIMIT}")
IMAGES = {name: image_uri(name, CONFIG.image_registry) for name in FAMILIES}

DOCKER = CONFIG.deployment is Deployment.DOCKER
# docker_jobs=all: every job runs in an image too: the stages in the kit's, a tiny model's weights (built
# with torch) in its family's, as its inference; images are built on the host.
ALL_IN_IMAGES = DOCKER and CONFIG.docker_jobs is DockerJobs.ALL
KIT_IMAGE = stage_image(KIT_FAMILY)
KIT_MB = stage_mb(KIT_FAMILY)
# The run's numbers (groups, overall columns, intervals) and, with multi-image scores, its verdict.
AGGREGATE = {"aggregate": P.aggregate_json} | ({"verdict": P.verdict_json} if has_verdict(RUN) else {})
BENCHMARK_TARGETS = [P.report_html, P.report_tex, *AGGREGATE.values()]
"""The run's default target (the top Snakefile's rule all): its report and aggregate."""


CONSOLE = RunConsole(SPECS, RUN, P, logger.info)


# Once, before any job runs (never in a dry run): every API model with cells left to answer has its key,
# or is marked keyless; else the run stops here, the reason on the console. Then a progress line for the
# whole run (samples answered, rate, ETA) every minute while samples are answered.
onstart:
    check_api_prerequisites()
    CONSOLE.start()


# The run's last words: the report's path and its headline verdict.
onsuccess:
    CONSOLE.finish()


onerror:
    CONSOLE.stop()


wildcard_constraints:
    model="|".join(RUN.models),
    task="[A-Za-z0-9-]+",
    mode="multi-image|combined-image|adversarial",
    regime="[A-Za-z0-9.-]+",
    family="[a-z0-9][a-z0-9-]*",


localrules:
    fixture,
    fetch,
    build_image,
    aggregate,
    report,
    main_table,
    archive,
    audit,


rule main_table:
    input:
        [P.task_score(c.model, c.task, c.mode) for c in CELLS if c.mode is Mode.MULTI_IMAGE],


for model_name in RUN.models:

    rule:
        name:
            f"model_{model_name}"
        input:
            [P.task_score(c.model, c.task, c.mode) for c in CELLS if c.model == model_name],


if RUN.data.kind == "fixture":

    rule fixture:
        input:
            image=KIT_IMAGE,
        output:
            directory(P.mirror),
        params:
            mb=KIT_MB,
            seed=RUN.data.seed,
            n=RUN.data.samples_per_task,
        log:
            P.logs("fixture", "fixture"),
        benchmark:
            P.benchmark("fixture", "fixture")
        container:
            IMAGES[KIT_FAMILY]
        resources:
            mem_mb=2000,
            runtime=30,
        shell:
            "{params.mb} fixture --out {output} --seed {params.seed}"
            " --samples-per-task {params.n} > {log} 2>&1"


rule fetch:
    input:
        mirror=[P.mirror] if RUN.data.kind == "fixture" else [],
        image=KIT_IMAGE,
    output:
        data=directory(P.data_root),
        markers=directory(P.extract_markers),
        manifest=P.fetch_manifest,
    params:
        mb=KIT_MB,
        run=RUN.name,
        root=job_root(P.data_root),
        source=spec_hash(RUN.data),
    log:
        P.logs("fetch", "fetch"),
    benchmark:
        P.benchmark("fetch", "fetch")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=4000,
        runtime=720,
    shell:
        "{params.mb} fetch --run {params.run} --root {params.root} > {log} 2>&1"


rule tiny_model:
    input:
        image=lambda w: stage_image(model_family(w.model)),
    output:
        directory(P.model_dir("{model}")),
    params:
        mb=lambda w: stage_mb(model_family(w.model)),
        run=RUN.name,
        root=job_root(P.model_dir("{model}")),
        spec=lambda w: spec_hash(MODELS[w.model].weights),
        shape=lambda w: (MODELS[w.model].max_context_len, MODELS[w.model].n_tokens_per_image),
    log:
        P.logs("tiny_model", "{model}"),
    benchmark:
        P.benchmark("tiny_model", "{model}")
    container:
        lambda w: IMAGES[model_family(w.model)]
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "{params.mb} tiny-model --run {params.run} --root {params.root} --model {wildcards.model} > {log} 2>&1"


rule build_image:
    output:
        update(str(RECORDS_DIR / "{family}.json")),
    params:
        mb=MB,
        files=lambda w: content_key(family(w.family)),
        base=f"--base {CONFIG.image_base}" if CONFIG.image_base else "",
        ca=Untracked(f"--ca-bundle {CONFIG.image_ca_bundle}" if CONFIG.image_ca_bundle else ""),
    log:
        P.logs("build_image", "{family}"),
    benchmark:
        P.benchmark("build_image", "{family}")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=2000,
        runtime=120,
    shell:
        "{params.mb} image build --family {wildcards.family} {params.base} {params.ca} > {log} 2>&1"


rule preprocess:
    input:
        data=P.data_root,
        tokenizer=lambda w: tokenizer_dirs(REGIMES[Mode(w.mode)][w.regime][0], P),
        image=KIT_IMAGE,
    output:
        prepared=P.prepared("{task}", "{mode}", "{regime}"),
        manifest=P.prepared_manifest("{task}", "{mode}", "{regime}"),
        tiles=directory(P.tiles("{task}", "{mode}", "{regime}")),
    params:
        mb=KIT_MB,
        run=RUN.name,
        root=job_root(P.prepared("{task}", "{mode}", "{regime}")),
        spec=lambda w: spec_hash(SPECS.tasks[w.task]),
        skip_bad=RUN.skip_bad_samples,
        limit=RUN.limit,
        max_pixels=RUN.max_image_pixels,
    # Threads tile combined pictures; the other modes build prompts in one thread.
    threads: lambda w: 2 if w.mode == "combined-image" else 1
    log:
        P.logs("preprocess", "{mode}.{regime}.{task}"),
    benchmark:
        P.benchmark("preprocess", "{mode}.{regime}.{task}")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=4000,
        runtime=120,
    shell:
        "{params.mb} preprocess --run {params.run} --root {params.root} --task {wildcards.task}"
        " --mode {wildcards.mode}"
        " --regime {wildcards.regime} --workers {threads} > {log} 2>&1"


# One job per cell for the built-in baselines: their cells run side by side.
rule infer:
    input:
        unpack(lambda w: infer_inputs(w.model, Mode(w.mode), [w.task])),
    output:
        predictions=P.predictions("{model}", "{task}", "{mode}"),
        provenance=P.infer_provenance("{model}", "{task}", "{mode}"),
    params:
        mb=MB,
        run=RUN.name,
        root=job_root(P.predictions("{model}", "{task}", "{mode}")),
        command=infer_command,
        spec=lambda w: spec_hash(MODELS[w.model]),
    wildcard_constraints:
        model=PER_CELL_MODELS,
    threads: lambda w: RESOURCES[w.model].threads
    log:
        P.logs("infer", "{model}.{mode}.{task}"),
    benchmark:
        P.benchmark("infer", "{model}.{mode}.{task}")
    container:
        lambda w: IMAGES[model_family(w.model)]
    resources:
        gpu=lambda w: RESOURCES[w.model].gpu,
        mem_mb=lambda w: RESOURCES[w.model].mem_mb,
        runtime=lambda w: RESOURCES[w.model].runtime,
    shell:
        "{params.mb} {params.command} --run {params.run} --root {params.root} --model {wildcards.model}"
        " --task {wildcards.task} --mode {wildcards.mode} --threads {threads} > {log} 2>&1"


# One job per (model, mode) for every other model (weights loaded once; an API's pre-flight request sent
# once): it answers every task of the mode, each cell with its own journal, predictions and provenance
# (`milebench infer` with many --task), so a killed job's rerun answers only what is left.
for mode, mode_task_names in (MODE_TASKS.items() if PER_MODE else ()):

    rule:
        name:
            f"infer_model_{mode.name.lower()}"
        input:
            unpack(lambda w, mode=mode, tasks=mode_task_names: infer_inputs(w.model, mode, tasks)),
        output:
            predictions=[P.predictions("{model}", task, mode) for task in mode_task_names],
            provenance=[P.infer_provenance("{model}", task, mode) for task in mode_task_names],
        params:
            mb=MB,
            run=RUN.name,
            root=job_root(P.predictions("{model}", mode_task_names[0], mode)),
            command=infer_command,
            spec=lambda w: spec_hash(MODELS[w.model]),
            tasks=" ".join(f"--task {task}" for task in mode_task_names),
        wildcard_constraints:
            model=PER_MODE_MODELS,
        threads: lambda w: RESOURCES[w.model].threads
        log:
            P.logs("infer", f"{{model}}.{mode}"),
        benchmark:
            P.benchmark("infer", f"{{model}}.{mode}")
        container:
            lambda w: IMAGES[model_family(w.model)]
        resources:
            gpu=lambda w: RESOURCES[w.model].gpu,
            mem_mb=lambda w: RESOURCES[w.model].mem_mb,
            runtime=lambda w, n=len(mode_task_names): RESOURCES[w.model].runtime * n,
        shell:
            "{params.mb} {params.command} --run {params.run} --root {params.root} --model {wildcards.model}"
            f" {{params.tasks}} --mode {mode} --threads {{threads}} > {{log}} 2>&1"


rule score:
    input:
        prepared=lambda w: P.prepared(w.task, w.mode, regime_of(w)),
        predictions=P.predictions("{model}", "{task}", "{mode}"),
        data=P.fetch_manifest,
        image=KIT_IMAGE,
    output:
        judgments=P.judgments("{model}", "{task}", "{mode}"),
        score=P.task_score("{model}", "{task}", "{mode}"),
        samples=P.samples("{model}", "{task}", "{mode}"),
        provenance=P.score_provenance("{model}", "{task}", "{mode}"),
    params:
        mb=KIT_MB,
        run=RUN.name,
        root=job_root(P.judgments("{model}", "{task}", "{mode}")),
        spec=lambda w: spec_hash(SPECS.tasks[w.task]),
    log:
        P.logs("score", "{model}.{mode}.{task}"),
    benchmark:
        P.benchmark("score", "{model}.{mode}.{task}")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "{params.mb} score --run {params.run} --root {params.root} --model {wildcards.model} --task {wildcards.task}"
        " --mode {wildcards.mode} > {log} 2>&1"


rule aggregate:
    input:
        scores=[P.task_score(*c) for c in CELLS],
        judgments=[P.judgments(*c) for c in CELLS],
        image=KIT_IMAGE,
    output:
        **AGGREGATE,
    params:
        mb=KIT_MB,
        run=RUN.name,
        root=job_root(P.aggregate_json),
        spec=spec_hash(RUN, exclude=frozenset({"audit"})),
        paper=spec_hash(PAPER),
    log:
        P.logs("aggregate", "aggregate"),
    benchmark:
        P.benchmark("aggregate", "aggregate")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "{params.mb} aggregate --run {params.run} --root {params.root} > {log} 2>&1"


rule report:
    input:
        **AGGREGATE,
        scores=[P.task_score(*c) for c in CELLS],
        # Per-sample evidence behind the figures and the truncation and skipped-sample tables, and provenance.
        judgments=[P.judgments(*c) for c in CELLS],
        prepared=[P.prepared(*j) for j in PREPARE_JOBS],
        manifests=[P.prepared_manifest(*j) for j in PREPARE_JOBS],
        provenance=[p for c in CELLS for p in (P.infer_provenance(*c), P.score_provenance(*c))],
        data=P.fetch_manifest,
        audit=AUDITS.files(P),
        image=KIT_IMAGE,
    output:
        html=P.report_html,
        tex=P.report_tex,
        provenance_tex=P.report_provenance_tex,
        figures=directory(P.report_figures),
    params:
        mb=KIT_MB,
        run=RUN.name,
        root=job_root(P.report_html),
        spec=spec_hash(RUN),
        paper=spec_hash(PAPER),
    log:
        P.logs("report", "report"),
    benchmark:
        P.benchmark("report", "report")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "mkdir -p {output.figures} && {params.mb} report --run {params.run} --root {params.root} > {log} 2>&1"


rule audit:
    input:
        AUDITS.files(P),


# A batch audit answers its samples alone and in shuffled batches (`milebench audit batch`): it loads the
# model as inference does, in the model's family image under deployment docker.
for index, batch_job in enumerate(AUDITS.batch):

    rule:
        name:
            f"audit_batch_{index}"
        input:
            unpack(lambda w, job=batch_job: audit_inputs(job)),
        output:
            json=P.audit(batch_job.name),
            markdown=P.audit(batch_job.name).with_suffix(".md"),
        params:
            mb=Untracked(f"{MB} --in-image {batch_job.model.container or KIT_FAMILY}") if DOCKER else MB,
            run=RUN.name,
            root=job_root(P.audit(batch_job.name)),
            arguments=" ".join(batch_job.arguments()),
            gpus="--gpus all" if DOCKER and RESOURCES[batch_job.plan.model].gpu else "",
            spec=spec_hash(batch_job.model),
        threads: RESOURCES[batch_job.plan.model].threads
        log:
            P.logs("audit", batch_job.name),
        benchmark:
            P.benchmark("audit", batch_job.name)
        container:
            IMAGES[batch_job.model.container or KIT_FAMILY]
        resources:
            gpu=RESOURCES[batch_job.plan.model].gpu,
            mem_mb=RESOURCES[batch_job.plan.model].mem_mb,
            runtime=RESOURCES[batch_job.plan.model].runtime,
        shell:
            "{params.mb} audit batch --run {params.run} --root {params.root} {params.arguments} {params.gpus}"
            " > {log} 2>&1"


# A drift audit compares two sides' judgments and predictions (`milebench audit drift`); side B may be
# another run's, which that run's own workflow makes.
for index, drift_job in enumerate(AUDITS.drift):
    side_b = RunPaths.for_run(drift_job.run_b)

    rule:
        name:
            f"audit_drift_{index}"
        input:
            a=[
                P.judgments(drift_job.plan.model_a, task, drift_job.plan.mode)
                for task in drift_job.tasks_a
            ],
            a_predictions=[
                P.predictions(drift_job.plan.model_a, task, drift_job.plan.mode)
                for task in drift_job.tasks_a
            ],
            b=[side_b.judgments(drift_job.model_b, task, drift_job.plan.mode) for task in drift_job.tasks_b],
            b_predictions=[
                side_b.predictions(drift_job.model_b, task, drift_job.plan.mode)
                for task in drift_job.tasks_b
            ],
            image=KIT_IMAGE,
        output:
            json=P.audit(drift_job.name),
            markdown=P.audit(drift_job.name).with_suffix(".md"),
        params:
            mb=KIT_MB,
            run=RUN.name,
            root=job_root(P.audit(drift_job.name)),
            arguments=" ".join(drift_job.arguments()),
        log:
            P.logs("audit", drift_job.name),
        benchmark:
            P.benchmark("audit", drift_job.name)
        container:
            IMAGES[KIT_FAMILY]
        resources:
            mem_mb=2000,
            runtime=30,
        shell:
            "{params.mb} audit drift --run {params.run} --root {params.root} {params.arguments} > {log} 2>&1"


rule archive:
    input:
        **AGGREGATE,
        html=P.report_html,
        tex=P.report_tex,
        predictions=[p for c in CELLS for p in (P.predictions(*c), P.infer_provenance(*c))],
        scores=[p for c in CELLS for p in (P.judgments(*c), P.task_score(*c), P.score_provenance(*c))],
        images=[RECORDS_DIR / f"{name}.json" for name in FAMILIES] if DOCKER else [],
    output:
        directory(Path("archives") / RUN.name),
    params:
        mb=MB,
        run=RUN.name,
        options=Untracked(CONFIG.archive_options),
    log:
        P.logs("archive", "archive"),
    container:
        IMAGES[KIT_FAMILY]
    shell:
        "{params.mb} archive --run {params.run} --out {output} {params.options} > {log} 2>&1"
