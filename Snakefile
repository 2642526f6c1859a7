"""MileBench reproducibility kit: fetch -> preprocess -> infer -> score -> report.

Choose a run spec with `--config run=NAME` (default: smoke, the embedded mini-MileBench) and a specs
folder with `--config specs=PATH`. All logic lives in the `milebench` package; every rule is one
`milebench` command, so any job can be re-run by hand.
"""

import sys
from pathlib import Path

from milebench.paths import RunPaths
from milebench.plan import cells, model_regimes, regimes
from milebench.preprocess.regime import tokenizer_dirs
from milebench.spec.registry import load_specs, spec_hash
from milebench.spec.model import TinyWeights
from milebench.spec.run import Mode

SPECS_DIR = Path(config.get("specs", workflow.basedir + "/specs")).resolve()
SPECS = load_specs(SPECS_DIR)
RUN = SPECS.run(config.get("run", "smoke"))
P = RunPaths.for_run(RUN)
CELLS = cells(SPECS, RUN)
TINY = [m.name for m in SPECS.run_models(RUN) if isinstance(m.weights, TinyWeights)]
REGIMES = regimes(SPECS, RUN)
MODEL_REGIME = model_regimes(SPECS, RUN)
MB = f"{sys.executable} -m milebench --specs {SPECS_DIR}"


wildcard_constraints:
    model="|".join(RUN.models),
    task="[A-Za-z0-9-]+",
    mode="multi-image|combined-image|adversarial",
    regime="[A-Za-z0-9.-]+",


rule all:
    input:
        P.report_html,
        P.report_tex,


if RUN.data.kind == "fixture":

    rule fixture:
        output:
            P.mirror / "milebench.lock.yaml",
        params:
            seed=RUN.data.seed,
            n=RUN.data.samples_per_task,
        log:
            P.logs("fixture", "fixture"),
        shell:
            "{MB} fixture --out {P.mirror} --seed {params.seed} --samples-per-task {params.n} > {log} 2>&1"


rule fetch:
    input:
        [P.mirror / "milebench.lock.yaml"] if RUN.data.kind == "fixture" else [],
    output:
        P.fetch_manifest,
    params:
        source=spec_hash(RUN.data),
    log:
        P.logs("fetch", "fetch"),
    shell:
        "{MB} fetch --run {RUN.name} > {log} 2>&1"


rule tiny_model:
    output:
        directory(P.model_dir("{model}")),
    params:
        spec=lambda w: spec_hash(SPECS.models[w.model]),
    log:
        P.logs("tiny_model", "{model}"),
    shell:
        "{MB} tiny-model --run {RUN.name} --model {wildcards.model} > {log} 2>&1"


def regime_of(w):
    """The input regime whose prepared file a model reads (models of one regime share the file)."""
    return MODEL_REGIME[(w.model, Mode(w.mode))]


rule preprocess:
    input:
        data=P.fetch_manifest,
        tokenizer=lambda w: tokenizer_dirs(REGIMES[Mode(w.mode)][w.regime][0], P),
    output:
        prepared=P.prepared("{task}", "{mode}", "{regime}"),
        manifest=P.prepared_manifest("{task}", "{mode}", "{regime}"),
    params:
        spec=lambda w: spec_hash(SPECS.tasks[w.task]),
        skip_bad=RUN.skip_bad_samples,
    threads: 2
    log:
        P.logs("preprocess", "{mode}.{regime}.{task}"),
    shell:
        "{MB} preprocess --run {RUN.name} --task {wildcards.task} --mode {wildcards.mode}"
        " --regime {wildcards.regime} --workers {threads} > {log} 2>&1"


rule infer:
    input:
        prepared=lambda w: P.prepared(w.task, w.mode, regime_of(w)),
        model=lambda w: [P.model_dir(w.model)] if w.model in TINY else [],
    output:
        P.predictions("{model}", "{task}", "{mode}"),
    params:
        spec=lambda w: spec_hash(SPECS.models[w.model]),
    log:
        P.logs("infer", "{model}.{mode}.{task}"),
    shell:
        "{MB} infer --run {RUN.name} --model {wildcards.model} --task {wildcards.task}"
        " --mode {wildcards.mode} > {log} 2>&1"


rule score:
    input:
        prepared=lambda w: P.prepared(w.task, w.mode, regime_of(w)),
        predictions=P.predictions("{model}", "{task}", "{mode}"),
    output:
        judgments=P.judgments("{model}", "{task}", "{mode}"),
        score=P.task_score("{model}", "{task}", "{mode}"),
    params:
        spec=lambda w: spec_hash(SPECS.tasks[w.task]),
    log:
        P.logs("score", "{model}.{mode}.{task}"),
    shell:
        "{MB} score --run {RUN.name} --model {wildcards.model} --task {wildcards.task}"
        " --mode {wildcards.mode} > {log} 2>&1"


rule report:
    input:
        [P.task_score(c.model, c.task, c.mode) for c in CELLS],
    output:
        html=P.report_html,
        tex=P.report_tex,
    params:
        paper=spec_hash(SPECS.paper),
    log:
        P.logs("report", "report"),
    shell:
        "{MB} report --run {RUN.name} > {log} 2>&1"
