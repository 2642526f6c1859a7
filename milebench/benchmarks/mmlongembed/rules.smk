"""MMLongEmbed rules: generate the Visual Grounding set, build the run's real-task pools, score them with
each embedder, evaluate, analyse, report.

Included by the top Snakefile when ``--config run=<name>`` names a run spec with ``benchmark: mmlongembed``
(milebench.benchmarks.mmlongembed declares this file). Every rule is one ``milebench embed-*`` command;
``BENCHMARK_RUN``, ``SPECS_DIR``, ``MB``, ``KIT_FAMILY``, ``image_uri`` and ``job_root`` come from the
Snakefile, which makes ``BENCHMARK_TARGETS`` its default target (its rule all). As there, every file a job
reads is a declared input and every file it writes a declared output (the embedding cache excepted: it
outlives a failed job on purpose), and each command is given the ``--root`` its paths are laid out under.
"""

from milebench.benchmarks.mmlongembed.generate import declared_inputs as vg_inputs
from milebench.benchmarks.mmlongembed.paper import load_embed_paper
from milebench.benchmarks.mmlongembed.paths import EmbedPaths
from milebench.benchmarks.mmlongembed.records import IMAGES as EMBED_IMAGES
from milebench.benchmarks.mmlongembed.spec import LINEAGE, load_embed_specs
from milebench.benchmarks.mmlongembed.task_sources import declared_inputs
from milebench.provenance import provenance_path
from milebench.spec.base import spec_hash as embed_spec_hash

EMBED_SPECS = load_embed_specs(SPECS_DIR)
ER = EMBED_SPECS.run(BENCHMARK_RUN)
EP = EmbedPaths.for_run(ER)
VG_SET = {"files": EP.vg_files, "manifest": EP.vg_manifest}
"""The Visual Grounding set as its readers take it: queries, candidates, pools, qrels and the manifest."""
TASK_SETS = {t.dataset: t for t in ER.real_tasks}
"""The run's real-task datasets, each built into its own set by ``embed_pools``."""
TASK_FILES = [f for d in TASK_SETS for f in [*EP.task_files(d), EP.task_manifest(d)]]
"""Every real-task set, read by the scoring and evaluation jobs beside the Visual Grounding set."""
BENCHMARK_TARGETS = [EP.report_html, EP.report_tex]
"""The run's default target (the top Snakefile's rule all)."""
IMAGES = {KIT_FAMILY: image_uri(KIT_FAMILY)}
"""The kit's image, for Snakemake's container support: a run spec of this benchmark names no registry."""


wildcard_constraints:
    embedder="|".join(ER.models),
    dataset="|".join(TASK_SETS),


rule embed_generate:
    input:
        vg_inputs(ER.visual_grounding, SPECS_DIR),
    output:
        **VG_SET,
        images=directory(EP.vg_images),
        provenance=provenance_path(EP.vg_manifest),
    params:
        mb=MB,
        run=ER.name,
        root=job_root(EP.vg_files[0]),
        spec=embed_spec_hash(ER.visual_grounding),
        tokenizer=embed_spec_hash(ER.counting_tokenizer),
    log:
        EP.logs("embed_generate", "vg"),
    benchmark:
        EP.benchmark("embed_generate", "vg")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "{params.mb} embed-generate --run {params.run} --root {params.root} > {log} 2>&1"


rule embed_pools:
    input:
        lambda w: declared_inputs(TASK_SETS[w.dataset], SPECS_DIR),
    output:
        files=EP.task_files("{dataset}"),
        manifest=EP.task_manifest("{dataset}"),
        images=directory(EP.task_set("{dataset}") / EMBED_IMAGES),
        provenance=provenance_path(EP.task_manifest("{dataset}")),
    params:
        mb=MB,
        run=ER.name,
        root=job_root(EP.task_files("{dataset}")[0]),
        spec=lambda w: embed_spec_hash(TASK_SETS[w.dataset]),
        tokenizer=embed_spec_hash(ER.counting_tokenizer),
    log:
        EP.logs("embed_pools", "{dataset}"),
    benchmark:
        EP.benchmark("embed_pools", "{dataset}")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "{params.mb} embed-pools --run {params.run} --root {params.root} --dataset {wildcards.dataset}"
        " > {log} 2>&1"


rule embed_run:
    input:
        **VG_SET,
        tasks=TASK_FILES,
        images=[EP.vg_images, *(EP.task_set(d) / EMBED_IMAGES for d in TASK_SETS)],
    output:
        scores=EP.scores("{embedder}"),
        inputs=EP.inputs("{embedder}"),
        provenance=provenance_path(EP.scores("{embedder}")),
    params:
        mb=MB,
        run=ER.name,
        root=job_root(EP.scores("{embedder}")),
        # A model's family and scale pair it for the scale test; they change no score.
        spec=lambda w: embed_spec_hash(EMBED_SPECS.models[w.embedder], exclude=LINEAGE),
    threads: 2
    log:
        EP.logs("embed_run", "{embedder}"),
    benchmark:
        EP.benchmark("embed_run", "{embedder}")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=4000,
        runtime=120,
    shell:
        "{params.mb} embed-run --run {params.run} --root {params.root} --model {wildcards.embedder}"
        " --threads {threads} > {log} 2>&1"


rule embed_evaluate:
    input:
        **VG_SET,
        tasks=TASK_FILES,
        scores=EP.scores("{embedder}"),
        inputs=EP.inputs("{embedder}"),
    output:
        EP.metrics("{embedder}"),
    params:
        mb=MB,
        run=ER.name,
        root=job_root(EP.metrics("{embedder}")),
        metrics=(ER.cutoffs, ER.heatmap_k, ER.ties),
    log:
        EP.logs("embed_evaluate", "{embedder}"),
    benchmark:
        EP.benchmark("embed_evaluate", "{embedder}")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "{params.mb} embed-evaluate --run {params.run} --root {params.root} --model {wildcards.embedder}"
        " > {log} 2>&1"


rule embed_aggregate:
    input:
        **VG_SET,
        tasks=TASK_FILES,
        metrics=[EP.metrics(m) for m in ER.models],
    output:
        analysis=EP.analysis,
        provenance=provenance_path(EP.analysis),
    params:
        mb=MB,
        run=ER.name,
        root=job_root(EP.analysis),
        spec=embed_spec_hash(ER),
        paper=embed_spec_hash(load_embed_paper(EMBED_SPECS)),
    log:
        EP.logs("embed_aggregate", "analysis"),
    benchmark:
        EP.benchmark("embed_aggregate", "analysis")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "{params.mb} embed-aggregate --run {params.run} --root {params.root} > {log} 2>&1"


rule embed_report:
    input:
        [EP.metrics(m) for m in ER.models],
        analysis=EP.analysis,
    output:
        html=EP.report_html,
        tex=EP.report_tex,
        figures=directory(EP.report_figures),
    params:
        mb=MB,
        run=ER.name,
        root=job_root(EP.report_html),
        spec=embed_spec_hash(ER),
    log:
        EP.logs("embed_report", "report"),
    benchmark:
        EP.benchmark("embed_report", "report")
    container:
        IMAGES[KIT_FAMILY]
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "{params.mb} embed-report --run {params.run} --root {params.root} > {log} 2>&1"


rule archive:
    input:
        [EP.metrics(m) for m in ER.models],
        [p for m in ER.models for p in (EP.scores(m), EP.inputs(m), provenance_path(EP.scores(m)))],
        analysis=EP.analysis,
        html=EP.report_html,
        tex=EP.report_tex,
    output:
        directory(Path("archives") / ER.name),
    params:
        mb=MB,
        run=ER.name,
        options=Untracked(CONFIG.archive_options),
    log:
        EP.logs("archive", "archive"),
    container:
        IMAGES[KIT_FAMILY]
    shell:
        "{params.mb} archive --run {params.run} --out {output} {params.options} > {log} 2>&1"
