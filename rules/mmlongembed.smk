"""MMLongEmbed rules: generate the Visual Grounding set, score it with each embedder, evaluate, report.

Included by the top Snakefile when ``--config run=<name>`` names a run spec with ``benchmark: mmlongembed``
(milebench.benchmarks.mmlongembed declares this file). Every rule is one ``milebench embed-*`` command;
``BENCHMARK_RUN``, ``SPECS_DIR`` and ``MB`` come from the Snakefile, which makes ``BENCHMARK_TARGETS`` its
default target.
"""

from milebench.benchmarks.mmlongembed.paths import EmbedPaths
from milebench.benchmarks.mmlongembed.spec import load_embed_specs
from milebench.spec.registry import spec_hash as embed_spec_hash

EMBED_SPECS = load_embed_specs(SPECS_DIR)
ER = EMBED_SPECS.run(BENCHMARK_RUN)
EP = EmbedPaths.for_run(ER)
BENCHMARK_TARGETS = [EP.report_html, EP.report_tex]
"""The run's default target (Snakemake keeps an included file's default_target from counting)."""


wildcard_constraints:
    embedder="|".join(ER.models),


rule embed_generate:
    output:
        files=EP.vg_files,
        manifest=EP.vg_manifest,
    params:
        mb=MB,
        run=ER.name,
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
        "{params.mb} embed-generate --run {params.run} > {log} 2>&1"


rule embed_run:
    input:
        EP.vg_manifest,
    output:
        scores=EP.scores("{embedder}"),
        inputs=EP.inputs("{embedder}"),
    params:
        mb=MB,
        run=ER.name,
        spec=lambda w: embed_spec_hash(EMBED_SPECS.models[w.embedder]),
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
        "{params.mb} embed-run --run {params.run} --model {wildcards.embedder} --threads {threads} > {log} 2>&1"


rule embed_evaluate:
    input:
        scores=EP.scores("{embedder}"),
        inputs=EP.inputs("{embedder}"),
    output:
        EP.metrics("{embedder}"),
    params:
        mb=MB,
        run=ER.name,
        metrics=(ER.cutoffs, ER.heatmap_k),
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
        "{params.mb} embed-evaluate --run {params.run} --model {wildcards.embedder} > {log} 2>&1"


rule embed_report:
    input:
        [EP.metrics(m) for m in ER.models],
    output:
        html=EP.report_html,
        tex=EP.report_tex,
        figures=directory(EP.report_figures),
    params:
        mb=MB,
        run=ER.name,
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
        "{params.mb} embed-report --run {params.run} > {log} 2>&1"
